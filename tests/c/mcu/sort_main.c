/* tests/c/mcu/sort_main.c — the test harness of `tfmc emit-c --static`
 * built for the bundled sort model at max_batch 1: the same C on the host
 * (host_io.c; under ASan+UBSan and valgrind) and on a Cortex-M4F under
 * QEMU (mps2_startup.c). It uses only model.h and mcu_io.h: no heap, no
 * stdio. Prints, for each sequence of sort_data.h (written by the test from
 * examples/sort/inputs.safetensors), the argmax token of every position
 * and every logit as the hex of its bits (the test compares them with
 * PyTorch's and the other platform's); then runs two models in two regions
 * interleaved and checks they agree bit for bit with the first pass; then
 * passes bad input of every kind and prints each refusal's message. Exit
 * status 0 when every check held. */
#include "model.h"

#include "mcu_io.h"
#include "sort_data.h" /* SORT_N, SORT_S, sort_tokens */

#include <string.h>

#define VOCAB 11

/* the packed image weights.c links in (emitted with --embed-weights) */
extern const unsigned char tfmc_weights_image[];

static unsigned char mem_a[TFMC_MEM_BYTES], mem_b[TFMC_MEM_BYTES];
static float logits[SORT_N][SORT_S * VOCAB];
static float again[SORT_S * VOCAB];
static uint64_t scratch[512]; /* a region too small, a region never set up */
static int failures;

static void put(const char *s) { mcu_write(s); }

static void put_u(uint64_t v) {
  char b[24];
  int i = (int)sizeof b - 1;
  b[i] = '\0';
  do {
    b[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  put(b + i);
}

static void put_hex(uint32_t v) {
  char b[9];
  for (int i = 7; i >= 0; i--, v >>= 4) b[i] = "0123456789abcdef"[v & 15];
  b[8] = '\0';
  put(b);
}

static void fail(const char *what) {
  put("FAIL ");
  put(what);
  put("\n");
  failures++;
}

static int run(TfmcModel *m, int64_t b, int64_t s, const int32_t *tokens, const uint8_t *mask,
               float *out, char *err, size_t errlen) {
  int64_t dims[2] = {b, s};
  const void *inputs[2] = {tokens, mask};
  float *outputs[1] = {out};
  return tfmc_model_run_buffers(m, dims, inputs, outputs, err, errlen);
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
  TfmcModel *a = tfmc_model_init(mem_a, sizeof mem_a, NULL, 0, err, sizeof err);
  TfmcModel *b = tfmc_model_init(mem_b, sizeof mem_b, NULL, 0, err, sizeof err);
  if (!a || !b) {
    put(err);
    put("\n");
    return 1;
  }
  put("model ");
  put(tfmc_model_name());
  put(": TFMC_MEM_BYTES ");
  put_u(TFMC_MEM_BYTES);
  put("\n");

  /* one pass: every sequence through model a, masks derived from the pads */
  uint32_t ticks_total = 0;
  for (int n = 0; n < SORT_N; n++) {
    mcu_ticks_start();
    if (run(a, 1, SORT_S, sort_tokens[n], NULL, logits[n], err, sizeof err)) {
      fail(err);
      continue;
    }
    ticks_total += mcu_ticks();
    put("seq ");
    put_u((uint64_t)n);
    put(": argmax");
    for (int t = 0; t < SORT_S; t++) {
      int best = 0;
      for (int v = 1; v < VOCAB; v++)
        if (logits[n][t * VOCAB + v] > logits[n][t * VOCAB + best]) best = v;
      put(" ");
      put_u((uint64_t)best);
    }
    put("\nseq ");
    put_u((uint64_t)n);
    put(": logits");
    for (int i = 0; i < SORT_S * VOCAB; i++) {
      uint32_t bits;
      memcpy(&bits, &logits[n][i], 4);
      put(" ");
      put_hex(bits);
    }
    put("\n");
  }
  if (mcu_ticks_available()) {
    uint32_t calib = mcu_calibrate();
    put("ticks per inference: ");
    put_u(ticks_total / SORT_N);
    put("; ticks for ");
    put_u(MCU_CALIBRATE_INSNS);
    put(" instructions: ");
    put_u(calib);
    put("; instructions per inference: ");
    put_u(calib ? (uint64_t)ticks_total / SORT_N * MCU_CALIBRATE_INSNS / calib : 0);
    put("\n");
  }

  /* two instances interleaved, in reverse order on b: each must give what
   * the first pass gave, bit for bit */
  int same = 1;
  for (int n = 0; n < SORT_N; n++) {
    int r = SORT_N - 1 - n;
    if (run(b, 1, SORT_S, sort_tokens[r], NULL, again, err, sizeof err) ||
        memcmp(again, logits[r], sizeof again) != 0)
      same = 0;
    if (run(a, 1, SORT_S, sort_tokens[n], NULL, again, err, sizeof err) ||
        memcmp(again, logits[n], sizeof again) != 0)
      same = 0;
  }
  if (same) put("two instances: the same logits, bit for bit\n");
  else fail("two instances disagree");
  /* a shorter sequence (S = 5, its own mask) runs too */
  uint8_t mask5[5] = {1, 1, 1, 1, 1};
  if (run(a, 1, 5, sort_tokens[0], mask5, again, err, sizeof err)) fail(err);

  /* bad input: refused through the return code, never a trap */
  int32_t bad[SORT_S];
  memcpy(bad, sort_tokens[0], sizeof bad);
  bad[3] = VOCAB;
  refused("id 11", run(a, 1, SORT_S, bad, NULL, again, err, sizeof err), err);
  bad[3] = -1;
  refused("id -1", run(a, 1, SORT_S, bad, NULL, again, err, sizeof err), err);
  bad[3] = 2147483647;
  refused("id INT32_MAX", run(a, 1, SORT_S, bad, NULL, again, err, sizeof err), err);
  refused("length 17", run(a, 1, 17, sort_tokens[0], NULL, again, err, sizeof err), err);
  refused("length 0", run(a, 1, 0, sort_tokens[0], NULL, again, err, sizeof err), err);
  refused("length -3", run(a, 1, -3, sort_tokens[0], NULL, again, err, sizeof err), err);
  refused("batch 2", run(a, 2, SORT_S, sort_tokens[0], NULL, again, err, sizeof err), err);
  uint8_t mask[SORT_S];
  memset(mask, 1, sizeof mask);
  mask[2] = 2;
  refused("mask 2", run(a, 1, SORT_S, sort_tokens[0], mask, again, err, sizeof err), err);
  memset(mask, 0, sizeof mask);
  refused("mask all 0", run(a, 1, SORT_S, sort_tokens[0], mask, again, err, sizeof err), err);
  refused("no tokens", run(a, 1, SORT_S, NULL, NULL, again, err, sizeof err), err);
  refused("no output", run(a, 1, SORT_S, sort_tokens[0], NULL, NULL, err, sizeof err), err);
  refused("no model", run(NULL, 1, SORT_S, sort_tokens[0], NULL, again, err, sizeof err), err);
  refused("uninitialised region",
          run((TfmcModel *)(void *)scratch, 1, SORT_S, sort_tokens[0], NULL, again, err, sizeof err),
          err);
  refused("region too small",
          tfmc_model_init(scratch, sizeof scratch, NULL, 0, err, sizeof err) == NULL, err);
  refused("not an image",
          tfmc_model_init(mem_b, sizeof mem_b, sort_tokens, sizeof sort_tokens, err, sizeof err) ==
              NULL,
          err);
  refused("image truncated",
          tfmc_model_init(mem_b, sizeof mem_b, tfmc_weights_image, 1000, err,
                          sizeof err) == NULL,
          err);
  /* a message buffer of 8 bytes gets a cut message, never an overflow */
  char small[8];
  if (run(a, 1, 17, sort_tokens[0], NULL, again, small, sizeof small) == 0 || strlen(small) != 7)
    fail("short message buffer");
  /* the model still runs after all that */
  if (run(a, 1, SORT_S, sort_tokens[0], NULL, again, err, sizeof err) ||
      memcmp(again, logits[0], sizeof again) != 0)
    fail("the model after the refusals");
  put(failures ? "done: FAILED\n" : "done: ok\n");
  return failures ? 1 : 0;
}
