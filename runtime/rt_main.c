/* runtime/rt_main.c — the main of standalone executables (see rt_model.h):
 * arguments, inputs, weights, pool, arena, the run, the outputs.
 *
 *   EXE (--inputs IN.safetensors | --tokens "IDS" | --text "SYMBOLS" --vocab V.txt
 *        | --text "TEXT" --tokenizer gpt2:DIR|wordpiece:VOCAB.txt[:uncased])
 *       [--outputs OUT.safetensors] [--vocab V.txt | --tokenizer SPEC] [--weights FILE]
 *       [--threads N] [--repeat N] [--profile] [--help] [--version]
 *       [--attention-map MAPS.svg|MAPS.html [--layer L|all] [--head H|all] [--batch-row R]]
 *
 * --attention-map (executables compiled with --attention LAYER|all) draws
 * the run's attention probabilities as `tfmc attention` does, through the
 * same code (rt_attnmap.h): the same model, weights and inputs give the
 * same bytes; with --generate, the rows of the generation, as `tfmc
 * attention --generate` draws them.
 *
 * --tokens / --text give one sequence (rt_text.c, as `tfmc run` takes it);
 * without --outputs the outputs are summarised on stdout as `tfmc run`
 * prints them (argmax tokens as symbols when --vocab is given, decoded
 * when --tokenizer is: rt_tokenizer.c).
 *
 * Invariants: every failure is a message on stderr prefixed with the
 * program name and an exit status (1: bad inputs, weights or environment;
 * 2: bad usage), never a crash; every resource taken is released on every
 * path (one cleanup block, in reverse order); the outputs file is only
 * written after a complete run (rt_file.h: atomically, through symlinks,
 * FIFOs and devices in place), and never when it names one of the files
 * being read or this executable (the same for the --attention-map
 * picture, which is not --outputs either); output that cannot be written to stdout
 * is an error (exit status 1). */
#include "runtime/rt_arena.h"
#include "runtime/rt_attnmap.h"
#include "runtime/rt_file.h"
#include "runtime/rt_gemm.h"
#include "runtime/rt_gen_model.h"
#include "runtime/rt_genrun.h"
#include "runtime/rt_model.h"
#include "runtime/rt_pool.h"
#include "runtime/rt_profile.h"
#include "runtime/rt_safetensors.h"
#include "runtime/rt_stepper.h"
#include "runtime/rt_text.h"
#include "runtime/rt_weights.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USER 1
#define EXIT_USAGE 2
#define MAIN_MAX_THREADS 256

/* The command line of an executable, as given (NULL / 0: absent): a
 * forward run's, or a generation's (rt_main_generate with --generate). */
typedef struct MainOpts {
  const char *inputs, *outputs, *weights, *threads, *repeat, *tokens, *text, *vocab, *tokenizer;
  const char *attention_map, *layer, *head, *batch_row;
  /* generation's */
  const char *generate, *temperature, *top_k, *top_p, *seed, *beams, *length_penalty, *output;
  int help, version, profile, sample;
} MainOpts;

/* Which command line an option belongs to. */
enum { MAIN_FORWARD = 1, MAIN_GENERATE = 2, MAIN_BOTH = 3 };

/* Every option, once: its name, its field of MainOpts (a value: const
 * char *; a flag: int), the command lines that take it and, for a flag,
 * those where --NAME=V is refused as taking no value (elsewhere it is an
 * unknown option, as it always was). --help is also -h. */
typedef struct MainOption {
  const char *name;
  size_t field; /* offsetof(MainOpts, ...) */
  int flag, modes, no_value;
} MainOption;

#define MAIN_VALUE(name, field, modes) {name, offsetof(MainOpts, field), 0, modes, 0}
#define MAIN_FLAG(name, field, modes, no_value) {name, offsetof(MainOpts, field), 1, modes, no_value}
static const MainOption main_options[] = {
    MAIN_VALUE("inputs", inputs, MAIN_BOTH),
    MAIN_VALUE("outputs", outputs, MAIN_BOTH),
    MAIN_VALUE("weights", weights, MAIN_BOTH),
    MAIN_VALUE("threads", threads, MAIN_BOTH),
    MAIN_VALUE("repeat", repeat, MAIN_BOTH),
    MAIN_VALUE("tokens", tokens, MAIN_BOTH),
    MAIN_VALUE("text", text, MAIN_BOTH),
    MAIN_VALUE("vocab", vocab, MAIN_BOTH),
    MAIN_VALUE("tokenizer", tokenizer, MAIN_BOTH),
    MAIN_VALUE("attention-map", attention_map, MAIN_BOTH),
    MAIN_VALUE("layer", layer, MAIN_BOTH),
    MAIN_VALUE("head", head, MAIN_BOTH),
    MAIN_VALUE("batch-row", batch_row, MAIN_BOTH),
    MAIN_VALUE("generate", generate, MAIN_GENERATE),
    MAIN_VALUE("temperature", temperature, MAIN_GENERATE),
    MAIN_VALUE("top-k", top_k, MAIN_GENERATE),
    MAIN_VALUE("top-p", top_p, MAIN_GENERATE),
    MAIN_VALUE("seed", seed, MAIN_GENERATE),
    MAIN_VALUE("beams", beams, MAIN_GENERATE),
    MAIN_VALUE("length-penalty", length_penalty, MAIN_GENERATE),
    MAIN_VALUE("output", output, MAIN_GENERATE), /* refused: rt_gen_args_parse says why */
    MAIN_FLAG("help", help, MAIN_BOTH, MAIN_GENERATE),
    MAIN_FLAG("version", version, MAIN_BOTH, 0),
    MAIN_FLAG("profile", profile, MAIN_FORWARD, MAIN_FORWARD),
    MAIN_FLAG("sample", sample, MAIN_GENERATE, MAIN_GENERATE),
};
#undef MAIN_VALUE
#undef MAIN_FLAG

static const char *prog_name(int argc, char **argv, const RtModelInfo *info) {
  if (argc > 0 && argv && argv[0] && argv[0][0]) {
    const char *slash = strrchr(argv[0], '/');
    return slash && slash[1] ? slash + 1 : argv[0];
  }
  return info && info->name ? info->name : "model";
}

static int usage_error(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int usage_error(const char *prog, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", prog);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(see '%s --help')\n", prog);
  va_end(ap);
  return EXIT_USAGE;
}

/* ---- --help ---- */

static void print_dims(FILE *f, const RtModelInfo *info, const RtTensorInfo *t) {
  fputc('[', f);
  for (int d = 0; d < t->rank && d < RT_MAX_RANK; d++) {
    const RtDim *dim = &t->dims[d];
    if (d)
      fputc(',', f);
    if (dim->sym >= 0 && dim->sym < info->n_syms && dim->sym < RT_MAX_SYMS)
      fputs(info->sym_names[dim->sym] ? info->sym_names[dim->sym] : "?", f);
    else
      fprintf(f, "%lld", (long long)dim->value);
  }
  fputc(']', f);
}

/* Whether --tokens / --text can give this model its inputs: its one ids
 * input is "tokens" and the others are padding masks (what rt_text_bind
 * takes). An encoder-decoder (src, tgt) or BERT with token_types cannot. */
static int takes_text(const RtModelInfo *info) {
  int tokens = 0, others = 0;
  for (int i = 0; i < info->n_inputs && i < RT_MAX_IO; i++) {
    const RtTensorInfo *t = &info->inputs[i];
    if (t->kind != RT_INPUT_IDS) continue;
    if (t->name && strcmp(t->name, "tokens") == 0) tokens++;
    else others++;
  }
  return tokens == 1 && others == 0;
}

/* --attention-map and its options, listed only when info outputs
 * attention probabilities (compiled with --attention); generation: the
 * rows of a generation (no --batch-row). */
static void print_attention_usage(FILE *f, const RtModelInfo *info, int generation) {
  if (rt_attnmap_has_layer(info, NULL, NULL, 0))
    return;
  static const char *const what[2] = {
      "                   draw the attention probabilities as 'tfmc attention'\n"
      "                   does: FILE.svg, or FILE.html (the SVG in a page); one\n"
      "                   heatmap per layer and head, queries down, keys across,\n",
      "                   draw the generation's attention as 'tfmc attention\n"
      "                   --generate' does: FILE.svg, or FILE.html (the SVG in\n"
      "                   a page); one heatmap per head, a row per generated\n"
      "                   token (the probabilities of the step that chose it),\n"};
  fprintf(f, "  --attention-map FILE\n%s"
             "                   labelled with the tokens (--vocab symbols, else ids);\n"
             "                   a PNG: rsvg-convert FILE.svg -o FILE.png\n"
             "  --layer LAYER    with --attention-map: ",
          what[generation != 0]);
  int n_out = info->n_outputs >= 0 && info->n_outputs <= RT_MAX_IO ? info->n_outputs : 0;
  for (int i = 0, k = 0; i < n_out; i++)
    if (rt_attnmap_output_layer(info, i))
      fprintf(f, "%s%s", k++ ? ", " : "", rt_attnmap_output_layer(info, i));
  fprintf(f, "%s\n"
             "  --head H         with --attention-map: one head, or all (the default)\n",
          generation ? " (the one compiled in)" : " or all\n                   (the default)");
  if (!generation)
    fprintf(f, "  --batch-row R    with --attention-map: which sequence of the batch\n"
               "                   (default 0)\n");
}

static void print_usage(FILE *f, const char *prog, const RtModelInfo *info, int embedded) {
  int text = takes_text(info);
  fprintf(f,
          "usage: %s --inputs IN.safetensors [--outputs OUT.safetensors] [--weights FILE]\n"
          "       [--threads N] [--repeat N] [--profile]\n",
          prog);
  if (text)
    fprintf(f,
            "   or: %s (--tokens \"IDS\" | --text \"SYMBOLS\" --vocab V.txt\n"
            "           | --text \"TEXT\" --tokenizer SPEC) [--outputs FILE] ...\n",
            prog);
  fprintf(f, "\nRuns the model '%s', compiled by tfmc.%s\n\n", info->name ? info->name : "?",
          text ? "" : "\nIts inputs (several kinds of ids) come as a safetensors file (--inputs).");
  int n_in = info->n_inputs >= 0 && info->n_inputs <= RT_MAX_IO ? info->n_inputs : 0;
  int n_out = info->n_outputs >= 0 && info->n_outputs <= RT_MAX_IO ? info->n_outputs : 0;
  fprintf(f, "Inputs (a safetensors file; token ids of any integer dtype):\n");
  for (int i = 0; i < n_in; i++) {
    const RtTensorInfo *t = &info->inputs[i];
    fprintf(f, "  %-14s ", t->name ? t->name : "?");
    print_dims(f, info, t);
    switch (t->kind) {
    case RT_INPUT_IDS: fprintf(f, "  token ids in [0, %lld)\n", (long long)t->vocab); break;
    case RT_INPUT_MASK: {
      const RtDim *b = &t->dims[0];
      const char *bname =
          b->sym >= 0 && b->sym < info->n_syms && b->sym < RT_MAX_SYMS && info->sym_names[b->sym]
              ? info->sym_names[b->sym]
              : "batch";
      fprintf(f, "  optional padding mask of '%s' (1 = real token)\n",
              t->ids_input ? t->ids_input : "?");
      fprintf(f, "  %-14s        ", "");
      if (t->lengths_name)
        fprintf(f, "or %s [%s] (lengths); ", t->lengths_name, bname);
      if (info->pad_id >= 0)
        fprintf(f, "default: ids != pad id %lld\n", (long long)info->pad_id);
      else
        fprintf(f, "default: no padding\n");
      break;
    }
    case RT_INPUT_VALUES: fprintf(f, "  f32 values\n"); break;
    case RT_INPUT_KIND_COUNT: fputc('\n', f); break;
    }
  }
  fprintf(f, "Outputs (f32):\n");
  for (int i = 0; i < n_out; i++) {
    fprintf(f, "  %-14s ", info->outputs[i].name ? info->outputs[i].name : "?");
    print_dims(f, info, &info->outputs[i]);
    fputc('\n', f);
  }
  if (info->n_syms > 0 && info->n_syms <= RT_MAX_SYMS) {
    fprintf(f, "Dimensions:");
    for (int s = 0; s < info->n_syms; s++)
      fprintf(f, "%s %s <= %lld", s ? "," : "", info->sym_names[s] ? info->sym_names[s] : "?",
              (long long)info->sym_max[s]);
    fputc('\n', f);
  }
  fprintf(f, "\nOptions:\n"
             "  --inputs FILE    the inputs above\n");
  if (text)
    fprintf(f,
            "  --tokens \"IDS\"   instead: one sequence (batch 1) of 'tokens', ids separated\n"
            "                   by spaces or commas; masks follow from the pad id\n"
            "  --text \"SYMBOLS\" instead: one sequence of whitespace-separated symbols of\n"
            "                   --vocab V.txt (one token per line, line k = id k)\n");
  fprintf(f, "  --vocab FILE     %s\n"
             "  --tokenizer SPEC instead of --vocab: a real tokenizer that %sdecodes the ids\n"
             "                   printed: gpt2:DIR (DIR/vocab.json and DIR/merges.txt; or\n"
             "                   gpt2:VOCAB.json,MERGES.txt), or wordpiece:VOCAB.txt[:uncased]\n"
             "                   (BERT; [CLS] ... [SEP])\n",
          text ? "the vocabulary of --text; also prints argmax ids as symbols"
               : "prints argmax ids as symbols",
          text ? "encodes any --text and " : "");
  fprintf(f, "  --outputs FILE   where to write the outputs (replaced atomically; must not be\n"
             "                   one of the files read); without it they are summarised on\n"
             "                   stdout (logits: the argmax token per position; class_logits:\n"
             "                   the class and its probability; else mean, rms, first values)\n");
  print_attention_usage(f, info, 0);
  if (embedded)
    fprintf(f, "  (the weights are embedded in this executable)\n");
  else
    fprintf(f, "  --weights FILE   packed weights (default: %s.weights next to the executable)\n",
            prog);
  fprintf(f,
          "  --threads N      threads to run on, 0..%d (0, the default: one per online CPU)\n"
          "  --repeat N       benchmark: after the run, N more timed runs; prints the\n"
          "                   median, min and max run time to stderr\n"
          "  --profile        then as many runs again (one without --repeat) timing every\n"
          "                   kernel; prints the time per op kind and the slowest kernels\n"
          "                   to stderr (the outputs are the same)\n"
          "  --help, --version\n"
          "Exit status: 0 success, 1 bad inputs or weights, 2 bad usage.\n",
          MAIN_MAX_THREADS);
}

/* ---- benchmarking ---- */

/* Runs the model n more times and prints the same timing line as
 * `tfmc run --repeat`. */
static int main_time_runs(RtModelRunFn run, const RtRunArgs *args, int n) {
  RtTiming t;
  if (rt_time_runs(run, args, n, &t)) return 1;
  fprintf(stderr, "timing: backend executable, compile 0.0 ms, run median %.3f ms (min %.3f, max %.3f) over %d runs\n",
          t.median_ms, t.min_ms, t.max_ms, t.runs);
  return 0;
}

/* ---- arguments ---- */

/* Reads argv into o: the options of `mode` (MAIN_FORWARD or
 * MAIN_GENERATE). Returns 0, or EXIT_USAGE after a message. */
static int parse_args(const char *prog, int argc, char **argv, int mode, MainOpts *o) {
  enum { N_OPTIONS = (int)(sizeof main_options / sizeof main_options[0]) };
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    if (!s)
      continue;
    if (strcmp(s, "-h") == 0) {
      o->help = 1;
      continue;
    }
    if (strncmp(s, "--", 2) != 0)
      return usage_error(prog, "unexpected argument '%s'", s);
    const char *key = s + 2, *eq = strchr(key, '=');
    size_t klen = eq ? (size_t)(eq - key) : strlen(key);
    const MainOption *m = NULL;
    for (int k = 0; k < N_OPTIONS; k++)
      if ((main_options[k].modes & mode) && strlen(main_options[k].name) == klen &&
          strncmp(main_options[k].name, key, klen) == 0)
        m = &main_options[k];
    if (m && m->flag) {
      if (!eq) {
        *(int *)(void *)((char *)o + m->field) = 1;
        continue;
      }
      if (m->no_value & mode)
        return usage_error(prog, "option '--%.*s' takes no value", (int)klen, key);
      m = NULL;
    }
    if (!m)
      return usage_error(prog, "unknown option '%.*s'", (int)(klen + 2), s);
    const char **slot = (const char **)(void *)((char *)o + m->field);
    const char *value = eq ? eq + 1 : NULL;
    if (!value) {
      if (i + 1 >= argc || !argv[i + 1])
        return usage_error(prog, "option '%s' needs a value", s);
      value = argv[++i];
    }
    if (*slot)
      return usage_error(prog, "option '--%.*s' given twice", (int)klen, key);
    if (!*value)
      return usage_error(prog, "option '--%.*s' has an empty value", (int)klen, key);
    *slot = value;
  }
  return 0;
}

/* The prompt (or inputs) options both command lines check, in this order:
 * one of --inputs, --tokens, --text (missing: `missing`), one of --vocab
 * and --tokenizer, --text with one of them. Returns 0, or EXIT_USAGE after
 * a message. */
static int check_prompt(const char *prog, const MainOpts *o, const char *missing) {
  if (!o->inputs && !o->tokens && !o->text)
    return usage_error(prog, "%s", missing);
  if (!!o->inputs + !!o->tokens + !!o->text != 1)
    return usage_error(prog, "give exactly one of --inputs, --tokens and --text");
  if (o->vocab && o->tokenizer)
    return usage_error(prog, "give one of --vocab and --tokenizer");
  if (o->text && !o->vocab && !o->tokenizer)
    return usage_error(prog, "--text needs --vocab or --tokenizer");
  return 0;
}

/* --threads N (0..MAIN_MAX_THREADS, 0: one per online CPU, as model.h's
 * n_threads) and --repeat N (1..100000); 0 when absent. Returns 0, or
 * EXIT_USAGE after a message. */
static int parse_counts(const char *prog, const MainOpts *o, int *threads, int *repeat) {
  *threads = *repeat = 0;
  if (o->threads) {
    char *end;
    errno = 0;
    long t = strtol(o->threads, &end, 10);
    if (errno || *end || o->threads[0] < '0' || o->threads[0] > '9' || t < 0 || t > MAIN_MAX_THREADS)
      return usage_error(prog, "--threads takes an integer in 0..%d (0: one per CPU), not '%s'",
                         MAIN_MAX_THREADS, o->threads);
    *threads = (int)t;
  }
  if (o->repeat) {
    char *end;
    errno = 0;
    long t = strtol(o->repeat, &end, 10);
    if (errno || *end || t < 1 || t > 100000)
      return usage_error(prog, "--repeat takes an integer in 1..100000, not '%s'", o->repeat);
    *repeat = (int)t;
  }
  return 0;
}

/* Refuses --weights when the weights are embedded. Returns 0, or
 * EXIT_USAGE after a message. */
static int check_weights_option(const char *prog, const MainOpts *o, const void *embedded) {
  if (embedded && o->weights)
    return usage_error(prog, "this executable embeds its weights; --weights is not accepted");
  return 0;
}

static int same_file(const char *a, const char *b) {
  return rt_file_same(a, b);
}

/* Refuses (1 after a message) an output path (--outputs, --attention-map:
 * NULL when not given) that names one of the files the run reads (inputs,
 * vocab, the tokenizer's files, weights_path) or this executable, or both
 * outputs naming one file. Before any work. */
static int refuse_clobber(const char *prog, const char *outputs, const char *map,
                          const char *inputs, const char *vocab, const char *tokenizer,
                          const char *weights_path, int argc, char **argv) {
  const char *outs[2] = {outputs, map}, *opts[2] = {"--outputs", "--attention-map"};
  for (int k = 0; k < 2; k++) {
    const char *out = outs[k];
    if (!out) continue;
    int clash = (inputs && same_file(inputs, out)) || (vocab && same_file(vocab, out)) ||
                (weights_path && same_file(weights_path, out)) ||
                same_file("/proc/self/exe", out) ||
                (argc > 0 && argv[0] && strchr(argv[0], '/') && same_file(argv[0], out));
    RtTokenizerFiles tf;
    char err[512];
    /* the files --tokenizer reads are inputs too (a bad spec is reported
     * when the tokenizer loads) */
    if (tokenizer && rt_tokenizer_files(tokenizer, &tf, err, sizeof err) == 0) {
      for (int i = 0; i < tf.n; i++) clash |= same_file(tf.files[i], out);
      rt_tokenizer_files_free(&tf);
    }
    if (clash) {
      fprintf(stderr, "%s: %s %s is one of the input files; refusing to overwrite it\n", prog,
              opts[k], out);
      return 1;
    }
  }
  if (outputs && map && same_file(outputs, map)) {
    fprintf(stderr, "%s: --attention-map %s is the --outputs file too; give the picture its own "
                    "file\n", prog, map);
    return 1;
  }
  return 0;
}

/* --attention-map and its options, checked against info (whose outputs
 * must hold the attention: compiled with --attention); r->out NULL when
 * there is no --attention-map. Returns 0, or EXIT_USAGE / EXIT_USER after
 * a message. */
static int attention_request(const char *prog, const RtModelInfo *info, const char *map,
                             const char *layer, const char *head, const char *row,
                             RtAttnRequest *r) {
  char err[1024];
  memset(r, 0, sizeof *r);
  if (!map) {
    if (layer || head || row)
      return usage_error(prog, "--%s goes with --attention-map FILE.svg",
                         layer ? "layer" : head ? "head" : "batch-row");
    return 0;
  }
  if (rt_attnmap_has_layer(info, NULL, err, sizeof err))
    return usage_error(prog, "--attention-map: %s", err);
  int rc = rt_attnmap_request("--attention-map", map, layer, head, row, r, err, sizeof err);
  if (!rc) rc = rt_attnmap_has_layer(info, r->layer, err, sizeof err);
  if (rc == 2) return usage_error(prog, "%s", err);
  if (rc) {
    fprintf(stderr, "%s: %s\n", prog, err);
    return EXIT_USER;
  }
  return 0;
}

/* The default weights path: EXE.weights next to the executable (via
 * /proc/self/exe, else argv[0]). Returns a malloc'd path or NULL. */
static char *default_weights_path(const char *argv0) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  const char *cands[2] = {NULL, argv0};
  if (n > 0) {
    exe[n] = '\0';
    cands[0] = exe;
  }
  char *first = NULL;
  for (int i = 0; i < 2; i++) {
    if (!cands[i] || (i == 1 && !strchr(cands[i], '/')))
      continue;
    size_t len = strlen(cands[i]);
    char *p = malloc(len + sizeof ".weights");
    if (!p)
      break;
    memcpy(p, cands[i], len);
    memcpy(p + len, ".weights", sizeof ".weights");
    if (access(p, F_OK) == 0) {
      free(first);
      return p;
    }
    if (!first)
      first = p;
    else
      free(p);
  }
  return first; /* does not exist: opening it will say so */
}

/* What both command lines take before the run, in this order: the weights
 * path (*weights_path: --weights, else EXE.weights; stays NULL when the
 * weights are embedded), the output files (--outputs, the picture map)
 * checked against what is read (refuse_clobber), --vocab, --tokenizer
 * (linked into *vocab). Returns 0, or 1 after a message; on either path
 * the caller frees what was taken. */
static int open_inputs(const char *prog, int argc, char **argv, const MainOpts *o,
                       const void *embedded, const char *map, char **weights_path, RtVocab *vocab,
                       RtTokenizer **tokenizer) {
  char err[1024];
  if (!embedded &&
      !(*weights_path = o->weights ? strdup(o->weights) : default_weights_path(argc > 0 ? argv[0] : NULL))) {
    fprintf(stderr, "%s: no weights file; pass --weights FILE\n", prog);
    return 1;
  }
  if (refuse_clobber(prog, o->outputs, map, o->inputs, o->vocab, o->tokenizer, *weights_path, argc,
                     argv))
    return 1;
  if (o->vocab && rt_text_vocab_load(o->vocab, vocab, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", prog, err);
    return 1;
  }
  if (o->tokenizer && rt_tokenizer_load(o->tokenizer, tokenizer, err, sizeof err)) {
    fprintf(stderr, "%s: --tokenizer: %s\n", prog, err);
    return 1;
  }
  vocab->tokenizer = *tokenizer;
  return 0;
}

/* rc, or EXIT_USER when what was printed to stdout cannot be written
 * (flushed, not closed: rt_main may be called again in one process). */
static int flush_stdout(const char *prog, int rc) {
  errno = 0;
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "%s: cannot write to standard output: %s\n", prog, strerror(errno));
    if (!rc)
      rc = EXIT_USER;
  }
  return rc;
}

/* ---- main ---- */

/* image: what the weights image holds (info, or a generation artefact's
 * whole image, whose first block is info's weights). */
static int main_run(const char *prog, int argc, char **argv, const RtModelInfo *info,
                    RtModelRunFn run, const RtModelInfo *image, const void *embedded,
                    size_t embedded_len);

int rt_main(int argc, char **argv, const RtModelInfo *info, RtModelRunFn run, const void *embedded,
            size_t embedded_len) {
  const char *prog = prog_name(argc, argv, info);
  return flush_stdout(prog, main_run(prog, argc, argv, info, run, info, embedded, embedded_len));
}

static int main_run(const char *prog, int argc, char **argv, const RtModelInfo *info,
                    RtModelRunFn run, const RtModelInfo *image, const void *embedded,
                    size_t embedded_len) {
  if (!info || !run) {
    fprintf(stderr, "%s: internal error: no model compiled in\n", prog);
    return EXIT_USER;
  }
  MainOpts o = {0};
  for (int i = 1; i < argc; i++) /* --help wins over any other mistake */
    if (argv[i] && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0))
      o.help = 1;
  int rc = o.help ? 0 : parse_args(prog, argc, argv, MAIN_FORWARD, &o);
  if (rc)
    return rc;
  if (o.help) {
    print_usage(stdout, prog, info, embedded != NULL);
    return 0;
  }
  if (o.version) {
    printf("%s: model '%s' compiled by tfmc (runtime ABI %u; this runtime ABI %d)\n"
           "gemm: %s\n",
           prog, info->name ? info->name : "?", info->abi_version, RT_ABI_VERSION,
           rt_gemm_backend());
    return 0;
  }
  int threads, repeat;
  if ((rc = check_prompt(prog, &o, "missing --inputs FILE (or --tokens \"IDS\", or --text "
                                   "\"SYMBOLS\" --vocab V.txt)")) ||
      (rc = parse_counts(prog, &o, &threads, &repeat)) ||
      (rc = check_weights_option(prog, &o, embedded)))
    return rc;
  RtAttnRequest maps;
  if ((rc = attention_request(prog, info, o.attention_map, o.layer, o.head, o.batch_row, &maps)))
    return rc;

  char err[1024];
  RtSafetensors *st = NULL;
  RtBound bound;
  int bound_ok = 0;
  RtWeights *weights = NULL;
  RtPool *pool = NULL;
  RtArena arena = {0};
  char *weights_path = NULL;
  RtVocab vocab = {0};
  RtTokenizer *tokenizer = NULL;
  rc = EXIT_USER;

  if (info->abi_version != RT_ABI_VERSION) {
    fprintf(stderr, "%s: model '%s' was compiled for runtime ABI %u; this runtime is ABI %d\n",
            prog, info->name ? info->name : "?", info->abi_version, RT_ABI_VERSION);
    goto done;
  }
  if (o.profile && (info->n_kernels <= 0 || !info->kernels)) {
    fprintf(stderr, "%s: --profile: model '%s' carries no kernel table\n", prog,
            info->name ? info->name : "?");
    goto done;
  }
  if (open_inputs(prog, argc, argv, &o, embedded, maps.out, &weights_path, &vocab, &tokenizer))
    goto done;
  /* inputs first: their checks are cheap, the weights checksum is not */
  if (o.inputs) {
    if (rt_st_open(o.inputs, &st, err, sizeof err)) {
      fprintf(stderr, "%s: %s\n", prog, err);
      goto done;
    }
    if (rt_model_bind(info, st, o.inputs, &bound, err, sizeof err)) {
      fprintf(stderr, "%s: %s\n", prog, err);
      goto done;
    }
    rt_st_close(st);
    st = NULL;
  } else if (rt_text_bind(info, o.tokens, o.text, &vocab, &bound, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", prog, err);
    goto done;
  }
  bound_ok = 1;
  if (embedded ? rt_weights_from_memory(embedded, embedded_len, image, &weights, err, sizeof err)
               : rt_weights_open(weights_path, image, &weights, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", prog, err);
    goto done;
  }
  (void)rt_gemm_backend(); /* may set environment variables: before any thread starts */
  if (threads != 1)
    pool = rt_pool_create(threads); /* NULL: run on this thread */
  /* planned at the maximum dims; what these dims touch is committed */
  if (rt_arena_open(&arena, info, err, sizeof err) ||
      rt_arena_commit(&arena, bound.syms, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", prog, err);
    goto done;
  }
  RtRunArgs args = {bound.syms, bound.inputs, bound.outputs, rt_weights_data(weights), arena.base, pool,
                    NULL /* no profile */, NULL /* no state: rt_model_info_check */};
  run(&args);
  if (repeat > 0 && main_time_runs(run, &args, repeat)) {
    fprintf(stderr, "%s: out of memory\n", prog);
    goto done;
  }
  /* after the timed runs, so profiling costs them nothing; warm caches */
  if (o.profile && rt_profile_runs(info->kernels, info->n_kernels, run, &args, repeat > 0 ? repeat : 1, stderr)) {
    fprintf(stderr, "%s: out of memory\n", prog);
    goto done;
  }
  /* the picture first: a head or batch row it cannot draw leaves nothing written */
  if (maps.out && rt_attnmap_draw_run(prog, info, &bound, o.vocab || tokenizer ? &vocab : NULL,
                                      &maps, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", prog, err);
    goto done;
  }
  if (o.outputs) {
    if (rt_model_write_outputs(info, &bound, o.outputs, err, sizeof err)) {
      fprintf(stderr, "%s: %s\n", prog, err);
      goto done;
    }
  } else {
    int bad = rt_text_print_bound(stdout, info, &bound, o.vocab || tokenizer ? &vocab : NULL);
    if (fflush(stdout) != 0 || ferror(stdout)) {
      fprintf(stderr, "%s: cannot write the outputs to stdout: %s\n", prog, strerror(errno));
      goto done;
    }
    if (bad) {
      fprintf(stderr, "%s: out of memory\n", prog);
      goto done;
    }
  }
  rc = 0;
done:
  rt_arena_close(&arena);
  rt_pool_destroy(pool);
  rt_weights_close(weights);
  if (bound_ok)
    rt_model_unbind(info, &bound);
  rt_st_close(st);
  rt_text_vocab_free(&vocab);
  rt_tokenizer_destroy(tokenizer);
  free(weights_path);
  return rc;
}

/* ---- generation executables (rt_gen_model.h) ---- */

static void print_gen_usage(FILE *f, const char *prog, const RtGenInfo *gi, int embedded) {
  const RtModelInfo *s = gi->step;
  int64_t max_len = rt_model_sym_max(s, "L"), beams = rt_model_sym_max(s, "B");
  if (beams < 1) /* no B symbol: one row */
    beams = 1;
  int64_t vocab = s->n_outputs > 0 && s->outputs[0].rank == 2 ? s->outputs[0].dims[1].value : 0;
  fprintf(f,
          "usage: %s --generate N (--tokens \"IDS\" | --text \"TEXT\" (--vocab V.txt | "
          "--tokenizer T)\n"
          "                        | --inputs IN.safetensors)\n"
          "       [--sample [--temperature T] [--top-k K] [--top-p P] [--seed S]\n"
          "        | --beams K [--length-penalty A]]\n"
          "       [--outputs OUT.safetensors] [--vocab V.txt | --tokenizer T]%s\n"
          "       [--threads N] [--repeat N]\n"
          "       %s --help | --version\n\n",
          prog, embedded ? "" : " [--weights FILE]", prog);
  fprintf(f, "Model '%s' (compiled by tfmc) generates with a KV cache:\n%s.\n",
          s->name ? s->name : "?",
          gi->encode ? "an encoder_decoder: the ids are the source, encoded once; the\n"
                       "target starts at bos"
                     : "a decoder: the ids are the prompt, run in one step (prefill)");
  fprintf(f, "max_len %lld positions, vocabulary %lld", (long long)max_len, (long long)vocab);
  if (gi->encode) fputc('\n', f);
  if (gi->encode && gi->encode->n_inputs > 0) {
    const RtModelInfo *e = gi->encode;
    fprintf(f, "; the source up to %lld ids below %lld", (long long)rt_model_sym_max(e, "S"),
            (long long)e->inputs[0].vocab);
  }
  if (gi->bos >= 0) fprintf(f, "; bos %lld", (long long)gi->bos);
  if (gi->eos >= 0) fprintf(f, "; eos %lld (generation stops there)", (long long)gi->eos);
  fprintf(f, ".\n\nOptions:\n"
             "  --generate N     generate at most N new tokens (stops at eos, or at max_len,\n"
             "                   which is said on stderr)\n"
             "  --tokens \"IDS\"   the prompt%s: ids separated by spaces or commas\n"
             "  --text \"TEXT\"    instead: text through --vocab (whitespace-separated symbols;\n"
             "                   unknown ones become <unk> when it has one) or --tokenizer\n"
             "  --inputs FILE    instead: a safetensors file holding %s [B,N], and for a\n"
             "                   padded batch (B up to %lld) its %s [B,N] (1 = real) or\n"
             "                   %s [B]: a line 'row R: IDS' per row when it is done\n"
             "  --vocab FILE     one token per line, line k = id k: prints the ids' symbols\n"
             "  --tokenizer SPEC instead of --vocab: gpt2:DIR (DIR/vocab.json, DIR/merges.txt;\n"
             "                   or gpt2:VOCAB.json,MERGES.txt) or wordpiece:VOCAB.txt[:uncased]\n"
             "  --sample         draw each token from softmax(logits / T) after top-k and\n"
             "                   top-p (default: greedy, the most probable token)\n"
             "  --temperature T  with --sample: T > 0 (default 1)\n"
             "  --top-k K        with --sample: keep the K most probable tokens (0: off, the\n"
             "                   default)\n"
             "  --top-p P        with --sample: nucleus, P in (0, 1] (1: off, the default)\n"
             "  --seed S         the sampler's PCG32 seed (default 0): the same seed gives the\n"
             "                   same tokens as 'tfmc run' on every backend (a batch's\n"
             "                   row R draws with S + R)\n"
             "  --beams K        beam search with K beams, 1..%lld (this executable's\n"
             "                   compiled maximum); score = sum of log-probs / len^A;\n"
             "                   the ids are printed when the search is done\n"
             "  --length-penalty A  with --beams: A (default 1)\n"
             "  --outputs FILE   also write generated (i64 [B,N]; -1 after a row's end) and\n"
             "                   generated_lengths (i64 [B]) as safetensors\n",
          gi->encode ? " (here: the source)" : "", gi->encode ? "src" : "tokens", (long long)beams,
          gi->encode ? "src_mask" : "mask", gi->encode ? "src_lengths" : "lengths",
          (long long)beams);
  for (int o = 1; o < s->n_outputs; o++)
    if (s->outputs[o].name && strcmp(s->outputs[o].name, "attention") == 0)
      fprintf(f, "                   and attention (f32 [1,H,N,K]: built with --attention, a row\n"
                 "                   per generated token, the probabilities of the step that\n"
                 "                   chose it over the %s)\n",
              gi->encode ? "source, K = S" : "prompt and generated tokens, K = P+N");
  print_attention_usage(f, s, 1);
  if (embedded)
    fprintf(f, "  (the weights are embedded in this executable)\n");
  else
    fprintf(f, "  --weights FILE   packed weights (default: %s.weights next to the executable)\n",
            prog);
  fprintf(f,
          "  --threads N      threads to run on, 0..%d (0, the default: one per online CPU)\n"
          "  --repeat N       benchmark: after the generation, N more, timed; prints the\n"
          "                   %sprefill time and the time per decoded token to stderr\n"
          "  --help, --version\n"
          "With --tokens or --inputs each generated id is printed as it comes, one per\n"
          "line (with its symbol given --vocab); with --text the generated text is.\n"
          "Exit status: 0 success, 1 bad inputs, values or weights, 2 bad usage.\n",
          MAIN_MAX_THREADS, gi->encode ? "encode time, the " : "");
}

int rt_main_generate(int argc, char **argv, const RtGenInfo *gi, RtModelRunFn forward,
                     RtModelRunFn step, RtModelRunFn encode, const void *embedded,
                     size_t embedded_len) {
  const char *prog = prog_name(argc, argv, gi ? gi->step : NULL);
  char err[1024];
  if (!gi || !step || !gi->forward != !forward || rt_gen_info_check(gi, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", prog, gi && step ? err : "internal error: no model compiled in");
    return EXIT_USER;
  }
  MainOpts o = {0};
  int generate = 0;
  for (int i = 1; i < argc; i++) { /* --help wins over any other mistake */
    if (argv[i] && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)) o.help = 1;
    if (argv[i] && (strcmp(argv[i], "--generate") == 0 || strncmp(argv[i], "--generate=", 11) == 0))
      generate = 1;
  }
  if (o.help) {
    print_gen_usage(stdout, prog, gi, embedded != NULL);
    if (gi->forward) {
      printf("\nWithout --generate: one forward pass, as 'tfmc run' without --generate.\n");
      print_usage(stdout, prog, gi->forward, embedded != NULL);
    }
    return fflush(stdout) ? EXIT_USER : 0;
  }
  if (!generate && gi->forward) { /* rt_main, on the forward pass's block of the image */
    return flush_stdout(
        prog, main_run(prog, argc, argv, gi->forward, forward, gi->weights, embedded, embedded_len));
  }
  int rc = parse_args(prog, argc, argv, MAIN_GENERATE, &o);
  if (rc) return rc;
  if (o.version) {
    printf("%s: model '%s' compiled by tfmc for generation (runtime ABI %u; this runtime ABI "
           "%d)\ngemm: %s\n",
           prog, gi->step->name ? gi->step->name : "?", gi->step->abi_version, RT_ABI_VERSION,
           rt_gemm_backend());
    return fflush(stdout) ? EXIT_USER : 0;
  }
  if (!o.generate)
    return usage_error(prog, "missing --generate N (this executable generates)");
  if ((rc = check_prompt(prog, &o, "missing the prompt: --tokens \"IDS\", --text \"TEXT\" (with "
                                   "--vocab or --tokenizer) or --inputs FILE")) ||
      (rc = check_weights_option(prog, &o, embedded)))
    return rc;
  if (o.attention_map && o.batch_row)
    return usage_error(prog, "--generate draws one sequence: no --batch-row");
  if (o.attention_map && !gi->step->attention_layer)
    return usage_error(prog, "--attention-map with --generate: model '%s' generates without "
                             "attention rows (tfmc build / emit-c --attention decoder.N[.cross] "
                             "compiles them in)", gi->step->name ? gi->step->name : "?");
  RtAttnRequest maps;
  if ((rc = attention_request(prog, gi->step, o.attention_map, o.layer, o.head, o.batch_row,
                              &maps)))
    return rc;
  RtGenArgStrings gs = {o.generate, o.sample, o.temperature,    o.top_k, o.top_p,
                        o.seed,     o.beams,  o.length_penalty, o.output};
  RtGenArgs g;
  if ((rc = rt_gen_args_parse(&gs, &g, err, sizeof err))) {
    if (rc == 2) return usage_error(prog, "%s", err);
    fprintf(stderr, "%s: %s\n", prog, err);
    return EXIT_USER;
  }
  int threads, repeat;
  if ((rc = parse_counts(prog, &o, &threads, &repeat)))
    return rc;

  RtVocab vocab = {0};
  RtTokenizer *tokenizer = NULL;
  char *weights_path = NULL;
  RtGenModel m;
  RtGenCapture cap = {0};
  int open = 0;
  rc = EXIT_USER;
  if (open_inputs(prog, argc, argv, &o, embedded, maps.out, &weights_path, &vocab, &tokenizer))
    goto done;
  if (rt_gen_model_open(&m, gi, step, encode, weights_path, embedded, embedded_len, threads, NULL,
                        err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", prog, err);
    goto done;
  }
  open = 1;
  RtGenRun run = {.prog = prog,
                  .backend = "executable",
                  .tokens = o.tokens,
                  .text = o.text,
                  .inputs = o.inputs,
                  .vocab = o.vocab || tokenizer ? &vocab : NULL,
                  .outputs = o.outputs,
                  .repeat = repeat,
                  .bos = gi->bos,
                  .eos = gi->eos,
                  .capture = maps.out ? &cap : NULL};
  if (rt_gen_run(&run, &g, &m.st)) goto done;
  if (maps.out && rt_attnmap_draw_generated(prog, gi->step->name, gi->step->attention_layer, &cap,
                                            o.vocab || tokenizer ? &vocab : NULL, &maps, err,
                                            sizeof err)) {
    fprintf(stderr, "%s: %s\n", prog, err);
    goto done;
  }
  rc = 0;
done:
  rt_gen_capture_free(&cap);
  if (open) rt_gen_model_close(&m);
  rt_text_vocab_free(&vocab);
  rt_tokenizer_destroy(tokenizer);
  free(weights_path);
  return flush_stdout(prog, rc);
}
