/* runtime/rt_genrun.h — generation on the command line, once: what
 * `tfmc run --generate` (on the JIT and the interpreter) and generation
 * executables (`tfmc build`, `tfmc emit-c`: rt_main_generate) both do, so
 * they accept, refuse, print and write the same things.
 *
 *     RtGenArgStrings s = {.generate = "20", .sample = 1, .temperature = "0.8"};
 *     RtGenArgs g;
 *     int rc = rt_gen_args_parse(&s, &g, err, sizeof err);  // 0, 1 (value), 2 (usage)
 *     ... an RtStepper st over the backend's programs (rt_stepper.h) ...
 *     RtGenRun r = {.prog = "tfmc", .backend = "jit", .text = "h e l l o", .vocab = &v,
 *                   .bos = 2, .eos = 3};
 *     if (rt_gen_run(&r, &g, &st)) exit 1;    // the message is on stderr
 *
 * The prompt (an encoder_decoder's source) is one sequence: --tokens "IDS",
 * --text "TEXT" through the vocabulary or tokenizer, or --inputs F.safetensors
 * holding `tokens` [1,T] (decoder) or `src` [1,S] (encoder_decoder). Or a
 * batch: --inputs with `tokens` [B,T] (`src` [B,S]), B > 1, padded as the
 * forward pass takes it (`mask` / `src_mask` [B,N], 1 = real token, or
 * `lengths` / `src_lengths` [B], or the pad id), each row one run of real
 * tokens, left- or right-padded (moved to the left for a decoder's prompts,
 * to the right for sources): every row generates at once
 * (rt_generate_batch), stops on its own, and is printed when it is done,
 * "row R: IDS" (a tab and its text with a vocabulary); sampled, row R draws
 * from a generator seeded with seed + R; --outputs holds generated [B,N],
 * RT_GEN_PAD_ID after a row's end. A
 * decoder's prompt runs in one step (prefill), then one step per token; an
 * encoder_decoder's source is encoded once and its target starts at bos.
 * Greedy, sampled (--sample) or beam-searched (--beams) through
 * rt_generate.h; ids stream to stdout as they are chosen (--tokens /
 * --inputs: one per line, with its symbol when there is a vocabulary;
 * --text: the text, bos and eos not printed); max_len is reported on stderr;
 * --repeat R times R more generations (encode, prefill, ms per decoded
 * token, the whole generation with the programs' compile time, as a
 * forward run's timing line has it); --outputs writes generated (i64 [1,N]) and generated_lengths
 * (i64 [1]), and, when the step program outputs one decoder layer's
 * attention (compiled with --attention LAYER, rt_stepper.h out_attn),
 * attention (f32 [1,H,N,K]): row g is the probabilities of the query that
 * chose generated id g (its step's last position) over the K keys, the
 * S source positions (cross-attention) or the prompt and generated
 * positions, P + N (self-attention; an encoder_decoder's prompt is bos;
 * the keys after the query's own are 0).
 * With beam search the rows are those of the best hypothesis, recomputed
 * once the search is done (its ids fed again on a fresh cache, batch row
 * 0: N more steps).
 *
 * libc only (with the runtime's safetensors, sampling and tokenizers). */
#ifndef TFMC_RT_GENRUN_H
#define TFMC_RT_GENRUN_H

#include "runtime/rt_sample.h"
#include "runtime/rt_stepper.h"
#include "runtime/rt_text.h"

#include <stddef.h>
#include <stdint.h>

/* The generation options as given (NULL: absent). */
typedef struct RtGenArgStrings {
  const char *generate; /* --generate N, required */
  int sample;           /* --sample given */
  const char *temperature, *top_k, *top_p;
  const char *seed;     /* NULL: 0 (tfmc run parses its --seed itself: it seeds weights too) */
  const char *beams, *length_penalty;
  const char *output;   /* --output NAME: refused (a forward pass's intermediates) */
} RtGenArgStrings;

typedef struct RtGenArgs {
  int64_t max_new;        /* >= 1 */
  RtSampleOptions sample; /* .sample: --sample */
  uint64_t seed;
  int beams;              /* 0: no --beams; else 1..RT_GEN_MAX_BEAMS */
  double length_penalty;  /* default 1 */
} RtGenArgs;

#define RT_GEN_MAX_BEAMS 64
/* What `generated` holds after a row's end in a batch's --outputs. */
#define RT_GEN_PAD_ID (-1)

/* Reads and checks the options: 0; or 1 for a bad value (exit status 1:
 * --generate below 1, --temperature <= 0 or not finite, --top-p outside
 * (0, 1], --top-k < 0, --beams outside 1..64 or with --sample, --output:
 * it names intermediates of the forward pass, which a generation does not
 * run; the message points at --outputs); or 2 for
 * bad usage (exit status 2: not a number, --temperature / --top-k /
 * --top-p without --sample, --length-penalty without --beams). The
 * message, in err, names the option. */
int rt_gen_args_parse(const RtGenArgStrings *s, RtGenArgs *g, char *err, size_t errlen);

/* What a run generated, for callers that draw it (tfmc attention
 * --generate): rt_gen_run fills it when RtGenRun.capture is set; the
 * arrays are malloc'd, freed by rt_gen_capture_free. */
typedef struct RtGenCapture {
  int32_t *ids;           /* the generated ids (eos kept) */
  int64_t n;
  float *attention;       /* [1, heads, n, keys] as --outputs writes it; NULL without */
  int64_t heads, keys;
  int32_t *key_ids;       /* what the keys are: the source (cross-attention), or the
                             prompt (an encoder_decoder's: bos) then the generated ids */
} RtGenCapture;

void rt_gen_capture_free(RtGenCapture *c);

typedef struct RtGenRun {
  const char *prog;    /* prefixes messages on stderr: "tfmc", the executable's name */
  const char *backend; /* names the backend in timing lines */
  const char *tokens, *text, *inputs; /* exactly one: the prompt, or the source */
  const RtVocab *vocab; /* NULL: none (ids printed bare); --text needs one */
  const char *outputs;  /* NULL: none */
  int repeat;           /* 0: no timing */
  double compile_ms;    /* the programs' compile time, in the --repeat summary (executables: 0) */
  int64_t bos, eos;     /* the spec's ids, -1: none (an encoder_decoder needs bos) */
  RtGenCapture *capture; /* NULL, or filled (then freed by the caller) */
} RtGenRun;

/* Generates (see the top of this file) on st, which holds a fresh state.
 * Returns 0, or 1 after printing "PROG: message" to stderr. */
int rt_gen_run(const RtGenRun *r, const RtGenArgs *g, RtStepper *st);

#endif
