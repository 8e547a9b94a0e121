/* tools/tfmc.c — the tfmc command line: check, ir, run, compare.
 *
 * Only argument handling, file plumbing and printing live here; every
 * decision about models is made by the frontend, passes and backends.
 * Exit status: 0 success, 1 user error (spec, weights, inputs), 2 usage. */
#include "backends/bench.h"
#include "backends/c/c_backend.h"
#include "backends/driver.h"
#include "backends/exec.h"
#include "backends/llvm/llvm_backend.h"
#include "frontend/spec.h"
#include "ir/loop.h"
#include "passes/passes.h"
#include "runtime/rt_attnmap.h"
#include "runtime/rt_file.h"
#include "runtime/rt_generate.h"
#include "runtime/rt_genrun.h"
#include "runtime/rt_io.h"
#include "runtime/rt_model.h"
#include "runtime/rt_profile.h"
#include "runtime/rt_safetensors.h"
#include "runtime/rt_text.h"
#include "runtime/rt_weights.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXIT_USER 1
#define EXIT_USAGE 2

/* ---- option parsing: --name value or --name=value ---- */

typedef struct Opt {
  const char *name;
  bool takes_value;
  const char *value; /* set when given; "" for flags */
  bool repeat;       /* may be given again: the values joined with ',' */
} Opt;

typedef struct Args {
  Opt *opts;
  int n_opts;
  const char *pos[4];
  int n_pos;
  char joined[8192]; /* the joined values of repeated options */
  size_t n_joined;
} Args;

static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "tfmc %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(see 'tfmc %s --help')\n", cmd);
  va_end(ap);
  return EXIT_USAGE;
}

/* Returns 0, 1 if --help was asked, or EXIT_USAGE. */
static int parse_args(const char *cmd, int argc, char **argv, Args *a) {
  for (int i = 0; i < argc; i++) {
    const char *s = argv[i];
    if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0)
      return 1;
    if (strcmp(s, "-o") == 0)
      s = "--o"; /* the compilers' spelling */
    if (strncmp(s, "--", 2) != 0 || strcmp(s, "--") == 0) {
      if (a->n_pos == 4)
        return usage_error(cmd, "too many arguments ('%s')", s);
      a->pos[a->n_pos++] = s;
      continue;
    }
    const char *eq = strchr(s, '=');
    size_t len = eq ? (size_t)(eq - s - 2) : strlen(s + 2);
    Opt *o = NULL;
    for (int k = 0; k < a->n_opts; k++)
      if (strlen(a->opts[k].name) == len && strncmp(a->opts[k].name, s + 2, len) == 0)
        o = &a->opts[k];
    if (!o)
      return usage_error(cmd, "unknown option '%.*s'", (int)len + 2, s);
    if (o->value && !o->repeat)
      return usage_error(cmd, "option '--%s' given twice", o->name);
    if (o->value) { /* again: joined with the earlier values */
      const char *more = eq ? eq + 1 : i + 1 < argc ? argv[i + 1] : NULL;
      if (!more)
        return usage_error(cmd, "option '--%s' needs a value", o->name);
      size_t room = sizeof a->joined - a->n_joined;
      int k = snprintf(a->joined + a->n_joined, room, "%s,%s", o->value, more);
      if (k < 0 || (size_t)k >= room)
        return usage_error(cmd, "too many '--%s' values", o->name);
      o->value = a->joined + a->n_joined;
      a->n_joined += (size_t)k + 1;
      if (!eq)
        i++;
      continue;
    }
    if (!o->takes_value) {
      if (eq)
        return usage_error(cmd, "option '--%s' takes no value", o->name);
      o->value = "";
    } else if (eq) {
      o->value = eq + 1;
    } else {
      if (i + 1 >= argc)
        return usage_error(cmd, "option '--%s' needs a value", o->name);
      o->value = argv[++i];
    }
  }
  return 0;
}

static const char *opt(const Args *a, const char *name) {
  for (int k = 0; k < a->n_opts; k++)
    if (strcmp(a->opts[k].name, name) == 0)
      return a->opts[k].value;
  return NULL;
}

/* ---- shared steps ---- */

static void shape_str(char *buf, size_t n, int rank, const int64_t *dims) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)dims[i]);
  if (k < n)
    snprintf(buf + k, n - k, "]");
}

static const char *human(double v, char *buf, size_t n) {
  const char *units[] = {"", "K", "M", "G", "T", "P"};
  int u = 0;
  while (fabs(v) >= 1000 && u < 5) {
    v /= 1000;
    u++;
  }
  snprintf(buf, n, u ? "%.2f%s" : "%.0f%s", v, units[u]);
  return buf;
}

/* Reports a failed driver_compile_file: its message, when the diagnostics
 * do not already say it all. */
static void compile_failed(const char *err) {
  if (*err)
    fprintf(stderr, "tfmc: %s\n", err);
}

/* --weights W | --init random [--seed N]: the weights every command that
 * runs or compiles a model takes. Returns 0, or EXIT_USAGE after a message;
 * *weights stays NULL for random weights. */
static int weights_source(const char *cmd, const Args *args, const char **weights, uint64_t *seed) {
  const char *init = opt(args, "init"), *s = opt(args, "seed");
  *weights = opt(args, "weights");
  *seed = 0;
  if (!!*weights + !!init != 1)
    return usage_error(cmd, "give exactly one of --weights and --init random");
  if (init && strcmp(init, "random") != 0)
    return usage_error(cmd, "--init takes 'random'");
  /* --seed also seeds --sample's generator (tfmc run --generate) */
  if (s && !init && !opt(args, "sample"))
    return usage_error(cmd, "--seed goes with --init random or --sample");
  if (s) {
    char *e;
    errno = 0;
    unsigned long long v = strtoull(s, &e, 10);
    if (*e || errno || !*s || strchr(s, '-')) /* strtoull takes " -1" */
      return usage_error(cmd, "--seed takes a non-negative integer");
    *seed = v;
  }
  return 0;
}

/* --output NAME[,NAME...] (repeatable): named intermediates that become
 * outputs too (LowerOptions.outputs). Returns 0 or EXIT_USAGE. */
typedef struct OutputNames {
  char buf[8192];
  const char *names[RT_MAX_IO];
  int n;
} OutputNames;

static int output_names(const char *cmd, const Args *args, OutputNames *on) {
  const char *s = opt(args, "output");
  on->n = 0;
  if (!s)
    return 0;
  snprintf(on->buf, sizeof on->buf, "%s", s);
  for (char *p = on->buf;;) {
    char *comma = strchr(p, ',');
    if (comma)
      *comma = 0;
    while (*p == ' ')
      p++;
    for (char *e = p + strlen(p); e > p && e[-1] == ' ';)
      *--e = 0;
    if (!*p)
      return usage_error(cmd, "--output takes intermediate names (see 'tfmc check SPEC')");
    if (on->n == RT_MAX_IO)
      return usage_error(cmd, "--output: at most %d names", RT_MAX_IO);
    on->names[on->n++] = p;
    if (!comma)
      return 0;
    p = comma + 1;
  }
}

/* ---- tfmc check ---- */

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

static const char *arch_name(Arch a) {
  switch (a) {
  case ARCH_ENCODER: return "encoder";
  case ARCH_DECODER: return "decoder";
  case ARCH_ENCODER_DECODER: return "encoder_decoder";
  case ARCH_COUNT: break;
  }
  return "?";
}

#define COMPILE_DEFAULT_LEVEL 2 /* run, build, emit-c, and what check reports */

static int cmd_check(int argc, char **argv) {
  Args args = {0};
  int r = parse_args("check", argc, argv, &args);
  if (r == 1) {
    puts("usage: tfmc check SPEC.tfm\n\n"
         "Parses and checks a model spec. Prints every error as file:line:col with\n"
         "the line and a caret; on success prints the architecture, parameter\n"
         "count, weight bytes (f32) and FLOPs per token at the maximum length.");
    return 0;
  }
  if (r)
    return r;
  if (args.n_pos != 1)
    return usage_error("check", "expected one spec file");
  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, stderr);
  int rc = EXIT_USER;
  char err[1024];
  Compiled c;
  if (ends_with(args.pos[0], ".tfir")) {
    arena_destroy(a);
    return usage_error("check", "expected a spec (.tfm); 'tfmc ir' reads .tfir graphs");
  }
  DriverOptions dopt = {.no_weights = true, .stage = DRIVER_LOOP};
  if (driver_compile_file(a, &d, args.pos[0], &dopt, &c, err, sizeof err)) {
    compile_failed(err);
    goto done;
  }
  const IrGraph *g = c.g;
  const ModelSpec *m = c.spec->model;
  int64_t sym[IR_MAX_SYMS];
  int64_t tokens = 0;
  for (int i = 0; i < g->n_syms; i++) {
    sym[i] = strcmp(g->syms[i].name, "B") == 0 ? 1 : g->syms[i].max;
    if (strcmp(g->syms[i].name, "B") != 0 && tokens == 0)
      tokens = g->syms[i].max;
  }
  /* per generated/classified token: the decoder length for decoders */
  for (int i = 0; i < g->n_syms; i++)
    if (strcmp(g->syms[i].name, "T") == 0)
      tokens = g->syms[i].max;
  GraphStats st;
  pass_stats_compute(g, sym, &st);
  char b1[32], b2[32], b3[32], b4[32];
  printf("%s: model '%s' ok\n", args.pos[0], m->name);
  printf("  arch            %s, d_model %lld, %lld heads, ffn %lld\n", arch_name(m->arch),
         (long long)m->d_model, (long long)m->heads, (long long)m->d_ff);
  printf("  layers          encoder %lld, decoder %lld\n", (long long)m->layers_enc,
         (long long)m->layers_dec);
  printf("  parameters      %lld (%s)\n", (long long)st.n_params,
         human((double)st.n_params, b1, sizeof b1));
  printf("  weight bytes    %lld (%sB as f32)\n", (long long)st.weight_bytes,
         human((double)st.weight_bytes, b2, sizeof b2));
  printf("  max shapes      batch %lld", (long long)m->max_batch);
  for (int i = 0; i < g->n_syms; i++)
    if (strcmp(g->syms[i].name, "B") != 0)
      printf(", %s %lld", g->syms[i].name, (long long)g->syms[i].max);
  printf("\n");
  printf("  FLOPs per token %s at length %lld (linear %s, attention %s per token)\n",
         human(st.flops / (double)tokens, b3, sizeof b3), (long long)tokens,
         human(st.flops_linear / (double)tokens, b4, sizeof b4),
         human(st.flops_attention / (double)tokens, b1, sizeof b1));
  /* the memory numbers are those of what run, build and emit-c compile by
   * default (-O2: the fusion passes change the plan); the counts above are
   * the spec's own graph */
  PassPipeline pl;
  PassContext pctx = {.diags = &d};
  bool level_ok = pass_pipeline_level(COMPILE_DEFAULT_LEVEL, &pl);
  TFMC_ASSERT(level_ok);
  Compiled co;
  DriverOptions oopt = {.no_weights = true, .stage = DRIVER_LOOP, .passes = &pl, .pass_ctx = &pctx};
  if (driver_compile_file(a, &d, args.pos[0], &oopt, &co, err, sizeof err)) {
    compile_failed(err);
    goto done;
  }
  const LoopProgram *lp = co.prog;
  printf("  arena           %lld bytes of activations at the maximum shapes (%d kernels at -O%d)\n",
         (long long)lp->arena_bytes, lp->n_kernels, COMPILE_DEFAULT_LEVEL);
  if (co.info) {
    CStaticMemory sm;
    c_static_memory(co.info, &sm);
    printf("  static memory   %lld bytes (TFMC_MEM_BYTES of emit-c --static: arena, state,"
           " masks, header)\n",
           (long long)sm.total);
  }
  if (m->arch != ARCH_ENCODER && (m->head == HEAD_LOGITS || m->head == HEAD_LOG_SOFTMAX)) {
    /* what tfmc run --generate compiles: the step graph and its KV cache
     * (and for an encoder_decoder the encode program and the cross keys /
     * values it hands to every step) */
    CompiledGeneration gen;
    DriverOptions sopt = {.no_weights = true, .stage = DRIVER_LOOP, .passes = &pl, .pass_ctx = &pctx};
    if (driver_compile_generation(a, &d, args.pos[0], &sopt, &gen, err, sizeof err)) {
      compile_failed(err);
      goto done;
    }
    printf("  generation      self-attention KV cache %lld bytes (batch 1, %lld positions), step "
           "arena %lld bytes\n",
           (long long)gen.step.prog->state_bytes, (long long)m->max_tgt,
           (long long)gen.step.prog->arena_bytes);
    if (gen.encoder_decoder) {
      int64_t cross = 0;
      const RtModelInfo *ei = gen.encode.info;
      for (int o = 0; o < ei->n_outputs; o++) {
        int64_t n = 4;
        for (int k = 0; k < ei->outputs[o].rank; k++)
          n *= ei->outputs[o].dims[k].sym < 0 ? ei->outputs[o].dims[k].value
               : strcmp(ei->sym_names[ei->outputs[o].dims[k].sym], "B") == 0
                   ? 1
                   : ei->sym_max[ei->outputs[o].dims[k].sym];
        cross += n;
      }
      printf("                  cross-attention K/V %lld bytes (batch 1, %lld source positions, "
             "%d tensors), encode arena %lld bytes\n",
             (long long)cross, (long long)m->max_src, ei->n_outputs,
             (long long)gen.encode.prog->arena_bytes);
    }
    CStaticGenMemory gm;
    if (gen.step.info &&
        !c_static_gen_memory(gen.step.info, gen.encoder_decoder ? gen.encode.info : NULL, &gm))
      printf("  static generation %lld bytes (TFMC_GEN_MEM_BYTES of emit-c --static: KV cache %lld,"
             " arena %lld, step buffers %lld, header %lld)\n",
             (long long)gm.total, (long long)gm.state, (long long)gm.arena, (long long)gm.stepper,
             (long long)gm.header);
  }
  printf("  graph           %lld nodes, inputs:", (long long)st.n_nodes);
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == IR_OP_INPUT)
      printf(" %s", g->nodes[i].attrs.name);
  printf("; outputs:");
  for (int i = 0; i < g->n_outputs; i++)
    printf(" %s", g->outputs[i].name);
  printf("\n");
  const char *named = NULL;
  if (spec_lower(a, c.spec, &(LowerOptions){.named_values = &named}, &d))
    printf("  --output names  %s\n", named);
  rc = 0;
done:
  arena_destroy(a);
  return rc;
}

/* ---- pass options (ir, run, build, emit-c): --passes=LIST | -O0..-O3,
 * --print-after, --print-file, --pass-stats. `tfmc ir` shows the graph as
 * built unless asked (-O0); the commands that compile default to -O2, as a
 * user of an optimising compiler expects ---- */

#define PASS_OPTS                                                                                  \
  {"passes", true, NULL}, {"print-after", true, NULL}, {"print-file", true, NULL},                 \
      {"pass-stats", false, NULL}, {"disable-pass", true, NULL}, {"tile", true, NULL, true},       \
      {"target-cache", true, NULL}, {"target-threads", true, NULL}, {                              \
    "weights-dtype", true, NULL                                                                    \
  }

static bool same_file(const char *a, const char *b);
static int refuse_overwrite(const char *cmd, const char *what, const char *out, bool within,
                            const char *const *ins, int n);

/* Takes -O0..-O3 out of argv (parse_args knows only --options; the value
 * of an option that takes one is left alone); *level = -1 when absent.
 * Returns 0 or EXIT_USAGE. */
static int take_opt_level(const char *cmd, const Args *args, int *argc, char **argv, int *level) {
  int n = 0;
  *level = -1;
  for (int i = 0; i < *argc; i++) {
    bool value_next = false;
    for (int k = 0; k < args->n_opts && strncmp(argv[i], "--", 2) == 0; k++)
      value_next |= args->opts[k].takes_value && strcmp(argv[i] + 2, args->opts[k].name) == 0;
    if (value_next && i + 1 < *argc) {
      argv[n++] = argv[i++];
      argv[n++] = argv[i];
      continue;
    }
    if (strncmp(argv[i], "-O", 2) != 0) {
      argv[n++] = argv[i];
      continue;
    }
    if (*level >= 0)
      return usage_error(cmd, "give one optimisation level");
    if (argv[i][2] < '0' || argv[i][2] > '3' || argv[i][3])
      return usage_error(cmd, "unknown level '%s' (levels: -O0, -O1, -O2, -O3)", argv[i]);
    *level = argv[i][2] - '0';
  }
  *argc = n;
  return 0;
}

/* --print-file FILE: the IR printed after passes, written as every other
 * output is (runtime/rt_file.h: temp + rename for a regular file, through a
 * symlink, in place to a FIFO or device); f is a stdio stream on a dup of
 * out.fd, so closing it leaves the output to commit or abort. */
typedef struct PrintFile {
  RtOut out;
  FILE *f; /* NULL: no --print-file */
} PrintFile;

static int print_file_open(PrintFile *pf, const char *path) {
  char err[1024];
  memset(pf, 0, sizeof *pf);
  pf->out.fd = -1;
  if (rt_out_open(&pf->out, path, 0, err, sizeof err)) {
    fprintf(stderr, "tfmc: --print-file: %s\n", err);
    return EXIT_USER;
  }
  int fd = dup(pf->out.fd);
  if (fd < 0 || !(pf->f = fdopen(fd, "w"))) {
    fprintf(stderr, "tfmc: --print-file: cannot write %s: %s\n", path, strerror(errno));
    if (fd >= 0)
      close(fd);
    rt_out_abort(&pf->out);
    return EXIT_USER;
  }
  return 0;
}

/* Ends --print-file: with ok (the command succeeded) the file gets its
 * name; otherwise, or when writing it failed, it is dropped (the old file,
 * if any, stays as it was). Returns 0, or EXIT_USER after a message. */
static int print_file_close(PrintFile *pf, bool ok) {
  if (!pf->f)
    return 0;
  const char *path = pf->out.path;
  int bad = fflush(pf->f) != 0 || ferror(pf->f);
  bad |= fclose(pf->f) != 0;
  pf->f = NULL;
  if (bad) {
    fprintf(stderr, "tfmc: --print-file: cannot write %s: %s\n", path, strerror(errno));
    rt_out_abort(&pf->out);
    return EXIT_USER;
  }
  if (!ok) {
    rt_out_abort(&pf->out);
    return 0;
  }
  char err[1024];
  if (rt_out_commit(&pf->out, err, sizeof err)) {
    fprintf(stderr, "tfmc: --print-file: %s\n", err);
    return EXIT_USER;
  }
  return 0;
}

/* The pipeline and context from the options (default_level without
 * --passes or -O); *pf is opened for --print-file (the caller ends it with
 * print_file_close), which must not be one of the n files (NULL entries
 * skipped) the command reads or writes, nor tfmc itself. Returns 0 or
 * EXIT_USAGE / EXIT_USER. */
static int pass_options(const char *cmd, const Args *args, int level, int default_level,
                        const char *const *files, int n, PassPipeline *pl, PassContext *ctx,
                        PrintFile *pf) {
  char err[1024];
  const char *list = opt(args, "passes"), *after = opt(args, "print-after");
  const char *path = opt(args, "print-file"), *disable = opt(args, "disable-pass");
  memset(pf, 0, sizeof *pf);
  pf->out.fd = -1;
  /* --passes=-a,-b: the level's pipeline (default or -O) less those */
  const char *first = list;
  while (first && (*first == ' ' || *first == '\t'))
    first++;
  bool removals = first && *first == '-';
  if (list && !removals && level >= 0)
    return usage_error(cmd, "give --passes or -O%d, not both", level);
  if (removals && disable)
    return usage_error(cmd, "give --passes=-NAME or --disable-pass=NAME, not both");
  if (removals)
    disable = list;
  if (list && !removals ? !pass_pipeline_parse(list, pl, err, sizeof err)
                        : !pass_pipeline_level(level < 0 ? default_level : level, pl))
    return usage_error(cmd, "--passes: %s", err);
  if (disable && !pass_pipeline_disable(pl, disable, err, sizeof err))
    return usage_error(cmd, "%s: %s", removals ? "--passes" : "--disable-pass", err);
  if (!pass_print_after_check(pl, after, err, sizeof err))
    return usage_error(cmd, "%s", err);
  if (path && !after)
    return usage_error(cmd, "--print-file goes with --print-after");
  for (int i = 0; path && i < n; i++)
    if (files[i] && (strcmp(path, files[i]) == 0 || same_file(path, files[i])))
      return usage_error(cmd, "--print-file %s would overwrite %s", path, files[i]);
  int r;
  if (path && (r = refuse_overwrite(cmd, "--print-file", path, false, NULL, 0)))
    return r;
  if (path && (r = print_file_open(pf, path)))
    return r;
  ctx->print_after = after;
  ctx->print_out = pf->f;
  ctx->stats_out = opt(args, "pass-stats") ? stderr : NULL;
  /* the target the tile pass sizes for: the host, or for emit-c (code for
   * another machine) a generic one, then what the options say */
  static PassTarget target;
  if (strcmp(cmd, "emit-c") == 0)
    pass_target_generic(&target);
  else
    pass_target_host(&target);
  const char *cache = opt(args, "target-cache"), *threads = opt(args, "target-threads");
  const char *tiles = opt(args, "tile");
  if (cache && !pass_target_parse_cache(&target, cache, err, sizeof err))
    return usage_error(cmd, "%s", err);
  if (threads && !pass_target_parse_threads(&target, threads, err, sizeof err))
    return usage_error(cmd, "%s", err);
  for (const char *t = tiles; t && *t;) { /* KEY=VALUE[,KEY=VALUE...] */
    const char *e = strchr(t, ',');
    char kv[128];
    snprintf(kv, sizeof kv, "%.*s", (int)(e ? e - t : (ptrdiff_t)strlen(t)), t);
    if (!pass_target_parse_tile(&target, kv, err, sizeof err))
      return usage_error(cmd, "%s", err);
    t = e ? e + 1 : NULL;
  }
  bool tile_runs = false;
  for (int i = 0; i < pl->n; i++)
    tile_runs |= strcmp(pl->passes[i]->name, "tile") == 0;
  if ((cache || threads || tiles) && !tile_runs)
    return usage_error(cmd, "--tile, --target-cache and --target-threads need the tile pass in "
                            "the pipeline (-O2, -O3, or --passes=...,tile)");
  ctx->target = &target;
  /* --weights-dtype: what pack-weights stores linears' weights as */
  const char *dtype = opt(args, "weights-dtype");
  ctx->weights_dtype = PASS_WEIGHTS_F32;
  if (dtype) {
    if (strcmp(dtype, "bf16") == 0)
      ctx->weights_dtype = PASS_WEIGHTS_BF16;
    else if (strcmp(dtype, "int8") == 0)
      ctx->weights_dtype = PASS_WEIGHTS_INT8;
    else if (strcmp(dtype, "f32") != 0)
      return usage_error(cmd, "--weights-dtype: '%s' is not one of f32, bf16, int8", dtype);
    bool pack_runs = false;
    for (int i = 0; i < pl->n; i++)
      pack_runs |= strcmp(pl->passes[i]->name, "pack-weights") == 0;
    if (!pack_runs && ctx->weights_dtype != PASS_WEIGHTS_F32)
      return usage_error(cmd, "--weights-dtype %s needs the pack-weights pass in the pipeline "
                              "(-O2, -O3, or --passes=...,pack-weights)", dtype);
    const char *backend = opt(args, "backend");
    if (backend && strcmp(backend, "interp") == 0 && ctx->weights_dtype != PASS_WEIGHTS_F32)
      return usage_error(cmd, "--weights-dtype %s is for compiled code: the interpreter (the "
                              "f32 reference) does not pack weights", dtype);
  }
  return 0;
}

/* ---- tfmc ir ---- */

static int cmd_ir(int argc, char **argv) {
  Opt o[] = {{"format", true, NULL}, {"attention", true, NULL}, {"level", true, NULL}, PASS_OPTS};
  Args args = {o, (int)(sizeof o / sizeof o[0]), {0}, 0};
  int olevel;
  int r = take_opt_level("ir", &args, &argc, argv, &olevel);
  if (!r)
    r = parse_args("ir", argc, argv, &args);
  if (r == 1) {
    puts("usage: tfmc ir SPEC.tfm|GRAPH.tfir|LOOPS.tfloop [--format text|dot]\n"
         "                [--attention LAYER] [--level graph|loop] [--passes=LIST | -O0..-O3]\n"
         "                [--print-after=PASS|all [--print-file FILE]] [--pass-stats]\n"
         "                [--tile KEY=VALUE] [--target-cache L1=S,L2=S,L3=S] [--target-threads N]\n\n"
         "Prints the graph IR of a spec (or parses a textual graph and prints it\n"
         "back) as text (default; parseable by 'tfmc ir FILE.tfir') or as Graphviz\n"
         "dot. --attention LAYER adds that layer's attention probabilities as an\n"
         "output (encoder.N, decoder.N, decoder.N.cross; all: every layer, as\n"
         "outputs attention.LAYER). --level loop prints the\n"
         "loop IR the compiled backends are generated from instead (kernels,\n"
         "buffers, the planned activation arena), after the loop passes; it\n"
         "reads back as a .tfloop file, which runs through the loop passes only.\n"
         "--passes=a,b,c runs those passes in order: graph passes on the graph,\n"
         "then, after lowering, loop passes on the loop IR (each verified after\n"
         "it); -O1..-O3 run the optimisation pipelines, -O0 (default) none.\n"
         "--print-after prints the IR after the named pass (or after every pass)\n"
         "to stderr, or to --print-file; --pass-stats prints each pass's time,\n"
         "node or kernel counts and what it did to stderr. Passes:");
    int n;
    const PassInfo *pi = pass_registry(&n);
    for (int i = 0; i < n; i++)
      printf("  %-20s %-5s %s\n", pi[i].name, pass_level_name(pi[i].level), pi[i].description);
    puts("Levels:");
    for (int level = 1; level <= 3; level++) {
      PassPipeline pl;
      pass_pipeline_level(level, &pl);
      printf("  -O%d ", level);
      for (int i = 0; i < pl.n; i++) printf("%s%s", i ? "," : "", pl.passes[i]->name);
      putchar('\n');
    }
    puts("--tile KEY=VALUE (repeatable, or a comma list) sets one of the tile pass's\n"
         "choices instead of letting it derive it from the target's caches; keys:");
    char keys[256];
    pass_tile_keys_list(keys, sizeof keys);
    printf("  %s\n", keys);
    puts("--target-cache L1=32K,L2=1M,L3=32M and --target-threads N say which\n"
         "machine the tile pass sizes for (default: this one, from /sys; for emit-c\n"
         "a generic L1=32K,L2=512K,L3=8M, 4 threads). They need the tile pass.");
    return 0;
  }
  if (r)
    return r;
  if (args.n_pos != 1)
    return usage_error("ir", "expected one spec, .tfir or .tfloop file");
  const char *level = opt(&args, "level") ? opt(&args, "level") : "graph";
  if (strcmp(level, "graph") != 0 && strcmp(level, "loop") != 0)
    return usage_error("ir", "--level must be graph or loop, not '%s'", level);
  if (strcmp(level, "loop") == 0 && opt(&args, "format") &&
      strcmp(opt(&args, "format"), "text") != 0)
    return usage_error("ir", "--level loop prints text only");
  const char *fmt = opt(&args, "format") ? opt(&args, "format") : "text";
  if (strcmp(fmt, "text") != 0 && strcmp(fmt, "dot") != 0)
    return usage_error("ir", "--format must be text or dot, not '%s'", fmt);
  PassPipeline pl;
  Diags d;
  PassContext pctx = {.diags = &d};
  PrintFile print_file;
  if ((r = pass_options("ir", &args, olevel, 0, args.pos, 1, &pl, &pctx, &print_file)))
    return r;
  if (ends_with(args.pos[0], ".tfir") && opt(&args, "attention")) {
    print_file_close(&print_file, false);
    return usage_error("ir", "--attention applies to specs, not .tfir files");
  }
  Arena *a = arena_create();
  diags_init(&d, a, stderr);
  int rc = EXIT_USER;
  char err[1024];
  Compiled c;
  bool loop = strcmp(level, "loop") == 0;
  pctx.print_dot = strcmp(fmt, "dot") == 0; /* --print-after draws the graph too */
  if (ends_with(args.pos[0], ".tfloop")) {
    LoopProgram *lp;
    DriverOptions lo = {.no_weights = true, .passes = &pl, .pass_ctx = &pctx};
    if (strcmp(fmt, "text") != 0) {
      rc = usage_error("ir", "a .tfloop file prints as text only");
    } else if (driver_compile_loop_file(a, &d, args.pos[0], &lo, &lp, err, sizeof err)) {
      compile_failed(err);
    } else {
      loop_program_print(lp, stdout);
      rc = 0;
    }
    goto done;
  }
  DriverOptions dopt = {.attention = opt(&args, "attention"),
                        .no_weights = true,
                        .passes = &pl,
                        .pass_ctx = &pctx,
                        .stage = loop ? DRIVER_LOOP : DRIVER_GRAPH};
  if (driver_compile_file(a, &d, args.pos[0], &dopt, &c, err, sizeof err)) {
    compile_failed(err);
    goto done;
  }
  if (loop)
    loop_program_print(c.prog, stdout);
  else if (strcmp(fmt, "dot") == 0)
    ir_graph_print_dot(c.g, stdout);
  else
    ir_graph_print(c.g, stdout);
  rc = 0;
done:
  if (print_file_close(&print_file, rc == 0))
    rc = EXIT_USER;
  arena_destroy(a);
  return rc;
}

/* ---- inputs: bound once, by the runtime's binders (the ones built
 * executables use), against the compiled model's I/O contract ---- */

/* Reads every model input from the safetensors file: ids range-checked,
 * masks derived from mask / lengths / pad ids, dims bound and checked,
 * tensors the model would ignore refused. */
static int inputs_from_file(const RtModelInfo *info, const char *path, RtBound *b) {
  RtSafetensors *st;
  char err[1024];
  if (rt_st_open(path, &st, err, sizeof err)) {
    fprintf(stderr, "tfmc: %s\n", err);
    return 1;
  }
  int rc = rt_model_bind(info, st, path, b, err, sizeof err);
  rt_st_close(st);
  if (rc)
    fprintf(stderr, "tfmc: %s\n", err);
  return rc ? 1 : 0;
}

/* --tokens "3 1 4" or --text "a b c" --vocab V: one sequence, batch 1. */
static int inputs_from_ids(const RtModelInfo *info, const char *tokens, const char *text,
                           const RtVocab *v, RtBound *b) {
  char err[1024];
  if (rt_text_bind(info, tokens, text, v, b, err, sizeof err)) {
    fprintf(stderr, "tfmc: %s\n", err);
    return 1;
  }
  return 0;
}

static bool same_file(const char *a, const char *b) {
  return rt_file_same(a, b) != 0;
}

/* Refuses, before any work, an output that is or resolves to one of the
 * command's inputs (n entries, NULL skipped; the tfmc binary counts too),
 * or, with within set, a directory holding one. what names the output as
 * the user gave it. Returns 0 or EXIT_USER after a message. */
static int refuse_overwrite(const char *cmd, const char *what, const char *out, bool within,
                            const char *const *ins, int n) {
  for (int i = 0; i <= n; i++) {
    const char *in = i < n ? ins[i] : "/proc/self/exe";
    if (!in || access(in, F_OK) != 0)
      continue;
    if (within ? rt_file_within(in, out) : same_file(out, in)) {
      fprintf(stderr, "tfmc %s: %s %s the input %s%s; refusing to overwrite it\n", cmd, what,
              within ? "holds" : "is", in, i < n ? "" : " (tfmc itself)");
      return EXIT_USER;
    }
  }
  return 0;
}

/* ---- tfmc run ---- */

/* ---- what run and attention share: the model compiled through the
 * driver for a backend and one set of inputs bound by the runtime's binders
 * (--inputs, --tokens or --text with --vocab or --tokenizer) ---- */

typedef struct RunInputs {
  const char *inputs, *tokens, *text, *vocab, *tokenizer;
  const char *tokenizer_files[2]; /* what --tokenizer reads (NULL: none), for refuse_overwrite */
  char tokenizer_paths[2][4096];
} RunInputs;

/* Reads and checks the input options; 0 or EXIT_USAGE after a message. */
static int run_inputs_options(const char *cmd, const Args *args, RunInputs *ri) {
  ri->inputs = opt(args, "inputs");
  ri->tokens = opt(args, "tokens");
  ri->text = opt(args, "text");
  ri->vocab = opt(args, "vocab");
  ri->tokenizer = opt(args, "tokenizer");
  if (!!ri->inputs + !!ri->tokens + !!ri->text != 1)
    return usage_error(cmd, "give exactly one of --inputs, --tokens and --text");
  if (ri->tokenizer && ri->vocab)
    return usage_error(cmd, "give one of --vocab and --tokenizer");
  if (ri->text && !ri->vocab && !ri->tokenizer)
    return usage_error(cmd, "--text needs --vocab or --tokenizer");
  ri->tokenizer_files[0] = ri->tokenizer_files[1] = NULL;
  if (ri->tokenizer) {
    RtTokenizerFiles f;
    char err[512];
    /* a bad spec is reported (exit 1) when the tokenizer loads */
    if (rt_tokenizer_files(ri->tokenizer, &f, err, sizeof err))
      return 0;
    for (int i = 0; i < f.n; i++) {
      snprintf(ri->tokenizer_paths[i], sizeof ri->tokenizer_paths[i], "%s", f.files[i]);
      ri->tokenizer_files[i] = ri->tokenizer_paths[i];
    }
    rt_tokenizer_files_free(&f);
  }
  return 0;
}

typedef struct Prepared {
  Arena *a;
  Compiled c;
  RtVocab vocab;          /* symbols of --vocab, or the --tokenizer */
  RtTokenizer *tokenizer; /* owned */
  RtBound bound;
} Prepared;

/* Compiles args->pos[0] with o, loads the vocabulary or tokenizer and binds
 * the inputs. p->a must be set (d reports into it). Returns 0, or
 * EXIT_USER after a message; prepared_free releases either way. */
static int prepare_run(Prepared *p, Diags *d, const Args *args, const RunInputs *ri,
                       const DriverOptions *o) {
  char err[1024];
  if (driver_compile_file(p->a, d, args->pos[0], o, &p->c, err, sizeof err)) {
    compile_failed(err);
    return EXIT_USER;
  }
  if (ri->vocab && rt_text_vocab_load(ri->vocab, &p->vocab, err, sizeof err)) {
    fprintf(stderr, "tfmc: %s\n", err);
    return EXIT_USER;
  }
  if (ri->tokenizer && rt_tokenizer_load(ri->tokenizer, &p->tokenizer, err, sizeof err)) {
    fprintf(stderr, "tfmc: --tokenizer: %s\n", err);
    return EXIT_USER;
  }
  p->vocab.tokenizer = p->tokenizer;
  if (ri->inputs ? inputs_from_file(p->c.info, ri->inputs, &p->bound)
                 : inputs_from_ids(p->c.info, ri->tokens, ri->text, &p->vocab, &p->bound))
    return EXIT_USER;
  return 0;
}

/* The vocabulary to print tokens with, or NULL. */
static const RtVocab *prepared_vocab(const Prepared *p, const RunInputs *ri) {
  return ri->vocab || p->tokenizer ? &p->vocab : NULL;
}

static void prepared_free(Prepared *p) {
  if (p->c.info)
    rt_model_unbind(p->c.info, &p->bound);
  rt_text_vocab_free(&p->vocab);
  rt_tokenizer_destroy(p->tokenizer);
  arena_destroy(p->a);
}

/* --threads N (0..256, 0: one per online CPU, as executables and model.h
 * take it) and --repeat N (1..100000), 0 when absent: run's and run
 * --generate's. Returns 0 or EXIT_USAGE after a message. */
static int run_counts(const Args *args, int *threads, int *repeat) {
  const char *t = opt(args, "threads"), *n = opt(args, "repeat");
  char *e;
  *threads = *repeat = 0;
  if (t) {
    long v = strtol(t, &e, 10);
    if (*e || !*t || v < 0 || v > 256)
      return usage_error("run", "--threads takes 0..256 (0: one per CPU)");
    *threads = (int)v;
  }
  if (n) {
    long v = strtol(n, &e, 10);
    if (*e || v < 1 || v > 100000)
      return usage_error("run", "--repeat takes 1..100000");
    *repeat = (int)v;
  }
  return 0;
}

/* ---- attention pictures (tfmc attention, with and without --generate) ---- */

/* What `tfmc attention --generate` draws of the generation: the step's
 * attention rows of one decoder layer (rt_attnmap_draw_generated), after
 * the run. */
typedef struct GenDraw {
  const char *layer;        /* decoder.N or decoder.N.cross */
  const RtAttnRequest *req; /* the picture, the head */
} GenDraw;

/* ---- tfmc run --generate: runtime/rt_genrun.h, as executables do it ---- */

/* The batch of an --inputs file: the rows of its `tokens` or `src` [B,N]
 * (1 when it has neither or cannot be read: rt_gen_run says why later).
 * The step graph is compiled for that many rows. */
static int64_t inputs_batch(const char *path) {
  RtSafetensors *st = NULL;
  char err[512];
  if (!path || rt_st_open(path, &st, err, sizeof err)) return 1;
  const RtStTensor *t = rt_st_find(st, "tokens");
  if (!t) t = rt_st_find(st, "src");
  int64_t b = t && t->rank == 2 && t->shape[0] > 1 ? t->shape[0] : 1;
  rt_st_close(st);
  return b;
}

/* draw NULL: tfmc run --generate; else tfmc attention --generate (whose
 * own options were checked), which draws the run instead of writing
 * --outputs. */
static int run_generate(const Args *args, int olevel, const char *weights, uint64_t seed,
                        const GenDraw *draw) {
  const char *cmd = draw ? "attention" : "run";
  const char *outputs = draw ? NULL : opt(args, "outputs");
  const char *attention = draw ? draw->layer : opt(args, "attention");
  const char *backend = opt(args, "backend"), *vocab_path = opt(args, "vocab");
  if (!backend)
    backend = "jit";
  RunInputs ri;
  int r;
  if ((r = run_inputs_options(cmd, args, &ri)))
    return r;
  if (opt(args, "profile"))
    return usage_error("run", "--generate does not take --profile yet");
  if (attention && !outputs && !draw)
    return usage_error("run", "--attention with --generate writes the tensor 'attention' to "
                              "--outputs OUT.safetensors: give --outputs");
  RtGenArgStrings gs = {.generate = opt(args, "generate"),
                        .sample = opt(args, "sample") != NULL,
                        .temperature = opt(args, "temperature"),
                        .top_k = opt(args, "top-k"),
                        .top_p = opt(args, "top-p"),
                        .beams = opt(args, "beams"),
                        .length_penalty = opt(args, "length-penalty"),
                        .output = opt(args, "output")};
  RtGenArgs g;
  char err[1024];
  if ((r = rt_gen_args_parse(&gs, &g, err, sizeof err)))
    return r == 2 ? usage_error(cmd, "%s", err) : (fprintf(stderr, "tfmc: %s\n", err), EXIT_USER);
  g.seed = seed; /* weights_source read --seed: with --init random it makes the weights too */
  DriverStage stage;
  if (!backend_known(backend, &stage))
    return usage_error(cmd, "unknown backend '%s' (available: jit, interp)", backend);
  int threads, repeat;
  if ((r = run_counts(args, &threads, &repeat)))
    return r;
  const char *ins[] = {args->pos[0], weights, vocab_path, ri.inputs, ri.tokenizer_files[0],
                       ri.tokenizer_files[1]};
  char what[4200];
  snprintf(what, sizeof what, "--outputs %s", outputs ? outputs : "");
  if (outputs && (r = refuse_overwrite("run", what, outputs, false, ins, 6)))
    return r;
  PassPipeline pl;
  Diags d;
  PassContext pctx = {.diags = &d};
  PrintFile print_file;
  const char *files[] = {args->pos[0], weights, vocab_path, outputs};
  if ((r = pass_options(cmd, (Args *)args, olevel, COMPILE_DEFAULT_LEVEL, files, 4, &pl, &pctx,
                        &print_file)))
    return r;
  Arena *a = arena_create();
  diags_init(&d, a, stderr);
  int rc = EXIT_USER;
  RtVocab vocab = {0};
  RtTokenizer *tokenizer = NULL;
  BackendStepper st = {0};
  CompiledGeneration gen;
  RtGenCapture cap = {0};
  DriverOptions dopt = {.attention = attention,
                        .weights = weights,
                        .seed = seed,
                        .passes = &pl,
                        .pass_ctx = &pctx,
                        .stage = stage,
                        .strict = opt(args, "strict") != NULL,
                        .step_rows = g.beams > 1 ? g.beams : 1};
  /* a batch of prompts (sources): one row each, up to the spec's max_batch */
  int64_t batch = inputs_batch(ri.inputs);
  if (batch > dopt.step_rows) dopt.step_rows = batch;
  if (driver_compile_generation(a, &d, args->pos[0], &dopt, &gen, err, sizeof err)) {
    compile_failed(err);
    goto done;
  }
  const ModelSpec *spec = gen.step.spec->model;
  if (batch > spec->max_batch) {
    fprintf(stderr, "tfmc: %s: a batch of %lld %s; model '%s' takes at most %lld (max_batch)\n",
            ri.inputs, (long long)batch, gen.encoder_decoder ? "sources" : "prompts", spec->name,
            (long long)spec->max_batch);
    goto done;
  }
  if (vocab_path && rt_text_vocab_load(vocab_path, &vocab, err, sizeof err)) {
    fprintf(stderr, "tfmc: %s\n", err);
    goto done;
  }
  if (ri.tokenizer && rt_tokenizer_load(ri.tokenizer, &tokenizer, err, sizeof err)) {
    fprintf(stderr, "tfmc: --tokenizer: %s\n", err);
    goto done;
  }
  vocab.tokenizer = tokenizer;
  ExecOptions eo = {threads, 0, false};
  if (backend_stepper_init(&st, backend, &gen.step, gen.encoder_decoder ? &gen.encode : NULL, &eo,
                           err, sizeof err)) {
    fprintf(stderr, "tfmc: %s\n", err);
    goto done;
  }
  RtGenRun run = {.prog = "tfmc",
                  .backend = backend,
                  .tokens = ri.tokens,
                  .text = ri.text,
                  .inputs = ri.inputs,
                  .vocab = vocab_path || tokenizer ? &vocab : NULL,
                  .outputs = outputs,
                  .repeat = repeat,
                  .compile_ms = st.compile_ms,
                  .bos = spec->bos_id,
                  .eos = spec->eos_id,
                  .capture = draw ? &cap : NULL};
  if (rt_gen_run(&run, &g, &st.rs))
    goto done;
  if (draw && rt_attnmap_draw_generated("tfmc", spec->name, draw->layer, &cap,
                                         vocab_path || tokenizer ? &vocab : NULL, draw->req, err,
                                         sizeof err)) {
    fprintf(stderr, "tfmc: %s\n", err);
    goto done;
  }
  rc = 0;
done:
  if (print_file_close(&print_file, rc == 0))
    rc = EXIT_USER;
  rt_gen_capture_free(&cap);
  backend_stepper_free(&st);
  rt_text_vocab_free(&vocab);
  rt_tokenizer_destroy(tokenizer);
  arena_destroy(a);
  return rc;
}

static int cmd_run(int argc, char **argv) {
  Opt o[] = {{"weights", true, NULL},      {"init", true, NULL},
             {"seed", true, NULL},         {"inputs", true, NULL},
             {"outputs", true, NULL},      {"attention", true, NULL},
             {"backend", true, NULL},      {"tokens", true, NULL},
             {"text", true, NULL},         {"vocab", true, NULL},
             {"threads", true, NULL},      {"repeat", true, NULL},
             {"profile", false, NULL},     {"strict", false, NULL},
             {"tokenizer", true, NULL},    {"generate", true, NULL},
             {"sample", false, NULL},      {"temperature", true, NULL},
             {"top-k", true, NULL},        {"top-p", true, NULL},
             {"beams", true, NULL},        {"length-penalty", true, NULL},
             {"output", true, NULL, true}, PASS_OPTS};
  Args args = {o, (int)(sizeof o / sizeof o[0]), {0}, 0};
  int olevel;
  int r = take_opt_level("run", &args, &argc, argv, &olevel);
  if (!r)
    r = parse_args("run", argc, argv, &args);
  if (r == 1) {
    puts(
        "usage: tfmc run SPEC.tfm|GRAPH.tfir (--weights W.safetensors | --init random [--seed N])\n"
        "                (--inputs IN.safetensors | --tokens \"IDS\" | --text \"SYMBOLS\" --vocab "
        "V.txt\n"
        "                 | --text \"TEXT\" --tokenizer gpt2:DIR | wordpiece:VOCAB.txt[:uncased])\n"
        "                [--outputs OUT.safetensors] [--attention LAYER] [--output NAME[,NAME]]\n"
        "                [--backend jit|interp]\n"
        "                [--threads N] [--repeat N] [--profile] [--strict] [--passes=LIST | "
        "-O0..-O3]\n"
        "                [--print-after=PASS|all [--print-file FILE]] [--pass-stats]\n"
        "       tfmc run SPEC.tfm (--weights W | --init random) --generate N\n"
        "                (--tokens \"IDS\" | --text \"TEXT\" (--vocab V.txt | --tokenizer T))\n"
        "                [--sample [--temperature T] [--top-k K] [--top-p P] [--seed N]\n"
        "                 | --beams K [--length-penalty A]]\n"
        "                [--outputs OUT.safetensors [--attention decoder.N[.cross]]]\n"
        "                [--backend jit|interp] [--repeat N]\n\n"
        "Runs the model. Inputs are named tensors (README 'Inputs and outputs'):\n"
        "tokens / src / tgt token ids (any integer dtype), optional lengths or\n"
        "mask (src_lengths, tgt_mask, ...), token_types. --tokens and --text give\n"
        "one sequence directly (--text looks whitespace-separated symbols up in\n"
        "the vocabulary file, one token per line, line k = id k). --tokenizer\n"
        "encodes any text instead and decodes the ids it prints: gpt2:DIR (GPT-2\n"
        "byte-level BPE from DIR/vocab.json and DIR/merges.txt; or\n"
        "gpt2:VOCAB.json,MERGES.txt) or wordpiece:VOCAB.txt[:uncased] (BERT\n"
        "WordPiece, [CLS] ... [SEP]; uncased lowercases and strips accents); with\n"
        "--tokens or --inputs it only decodes what is printed. Outputs go to\n"
        "--outputs as safetensors, or are summarised on stdout. --attention LAYER\n"
        "(encoder.N, decoder.N, decoder.N.cross) also outputs that layer's\n"
        "attention probabilities [B,H,Tq,Tk] as \"attention\"; --attention all\n"
        "outputs every layer's, as attention.encoder.0, ... --output NAME (repeatable,\n"
        "or a comma list) also outputs a named intermediate: embeddings, enc.N.out,\n"
        "dec.N.out, encoder.out, decoder.out, hidden, pooled ('tfmc check SPEC' lists\n"
        "the model's). --backend: jit\n"
        "(default; LLVM, native code for this CPU) or interp (the reference\n"
        "interpreter).\n"
        "--threads N: worker threads for the JIT, 0..256 (0, the default: one per CPU).\n"
        "--repeat N: after one warm-up, run N more times and print the median,\n"
        "min and max run time (and the JIT's compile time) to stderr.\n"
        "--profile: time every compiled kernel and print the time per op kind and\n"
        "the slowest kernels to stderr.\n"
        "--passes / -O run graph and loop passes before the backend, as 'tfmc ir'\n"
        "does (see 'tfmc ir --help' for the passes); the default is -O2, -O0 runs\n"
        "none; --disable-pass=a,b takes passes out of the pipeline.\n"
        "NaN or Inf values in the --weights checkpoint are warned about (each weight\n"
        "named with its count); --strict makes them an error (also on build, emit-c).\n"
        "--generate N (decoder and encoder_decoder specs): greedy generation with a KV\n"
        "cache. A decoder's prompt runs in one step, then one step per new\n"
        "token; an encoder_decoder's ids are the source, encoded once, and the target\n"
        "starts at the spec's bos. Until N tokens, the spec's eos or max_len. With\n"
        "--tokens each id is printed as it comes (with its symbol when --vocab is\n"
        "given); with --text the generated text is. --outputs writes generated\n"
        "(i64 [1,N]) and generated_lengths (i64 [1]); --repeat N times N more\n"
        "generations and prints the prefill time, the time per decoded token and\n"
        "the whole generation's, with the compile time. --output does not apply.\n"
        "--inputs with tokens [B,T] (src [B,S]) and optionally mask [B,T] (src_mask)\n"
        "or lengths [B] (src_lengths) generates for a batch of B padded prompts\n"
        "(sources) at once: a line 'row R: IDS' per row when it is done (a finished\n"
        "row leaves the batch: later steps run the live rows only); generated\n"
        "[B,N] is -1 after a row's end; --sample draws row R with --seed + R.\n"
        "--attention decoder.N (decoder.N.cross) also writes attention [1,H,N,K]:\n"
        "row g is that layer's probabilities for the query that chose generated\n"
        "token g, over the prompt and the generated tokens (K = P+N; later keys 0)\n"
        "or over the source (K = S); with --beams, the best hypothesis's rows.\n"
        "--beams K: beam search with K beams, score = sum of log-probs / len^A\n"
        "(--length-penalty A, default 1). Greedy by default;\n"
        "--sample draws each token from softmax(logits / T) after top-k and top-p\n"
        "(defaults: T 1, top-k off, top-p 1) with a PCG32 generator seeded by --seed\n"
        "(default 0): the same seed gives the same tokens on every backend.");
    return 0;
  }
  if (r)
    return r;
  if (args.n_pos != 1)
    return usage_error("run", "expected one spec file");
  const char *weights;
  uint64_t seed;
  if ((r = weights_source("run", &args, &weights, &seed)))
    return r;
  if (opt(&args, "generate"))
    return run_generate(&args, olevel, weights, seed, NULL);
  RunInputs ri;
  if ((r = run_inputs_options("run", &args, &ri)))
    return r;
  OutputNames on;
  if ((r = output_names("run", &args, &on)))
    return r;
  const char *outputs = opt(&args, "outputs"), *backend = opt(&args, "backend");
  if (!backend)
    backend = "jit";
  bool profile = opt(&args, "profile") != NULL;
  if (profile && strcmp(backend, "jit") != 0)
    return usage_error("run", "--profile needs --backend jit");
  DriverStage stage;
  if (!backend_known(backend, &stage))
    return usage_error("run", "unknown backend '%s' (available: jit, interp)", backend);
  int threads, repeat;
  if ((r = run_counts(&args, &threads, &repeat)))
    return r;
  const char *ins[] = {args.pos[0],          weights, ri.inputs, ri.vocab, ri.tokenizer_files[0],
                       ri.tokenizer_files[1]};
  char what[4200];
  snprintf(what, sizeof what, "--outputs %s", outputs ? outputs : "");
  if (outputs && (r = refuse_overwrite("run", what, outputs, false, ins, 6)))
    return r;
  PassPipeline pl;
  Diags d;
  PassContext pctx = {.diags = &d};
  PrintFile print_file;
  const char *files[] = {args.pos[0], weights, ri.inputs, ri.vocab, outputs};
  if ((r = pass_options("run", &args, olevel, COMPILE_DEFAULT_LEVEL, files, 5, &pl, &pctx,
                        &print_file)))
    return r;

  Prepared p = {.a = arena_create()};
  diags_init(&d, p.a, stderr);
  int rc = EXIT_USER;
  char err[1024];
  DriverOptions dopt = {.attention = opt(&args, "attention"),
                        .weights = weights,
                        .seed = seed,
                        .passes = &pl,
                        .pass_ctx = &pctx,
                        .stage = stage,
                        .strict = opt(&args, "strict") != NULL,
                        .outputs = on.names,
                        .n_outputs = on.n};
  if (prepare_run(&p, &d, &args, &ri, &dopt))
    goto done;
  ExecOptions eo = {threads, repeat, profile};
  ExecTiming tm;
  if (backend_run(backend, &p.c, &p.bound, &eo, &tm, err, sizeof err)) {
    fprintf(stderr, "tfmc: %s\n", err);
    goto done;
  }
  if (repeat)
    fprintf(stderr,
            "timing: backend %s, compile %.1f ms, run median %.3f ms (min %.3f, max %.3f) over %d "
            "runs\n",
            backend, tm.compile_ms, tm.run_ms_median, tm.run_ms_min, tm.run_ms_max, tm.runs);
  if (outputs) {
    if (rt_model_write_outputs(p.c.info, &p.bound, outputs, err, sizeof err)) {
      fprintf(stderr, "tfmc: %s\n", err);
      goto done;
    }
  } else if (rt_text_print_bound(stdout, p.c.info, &p.bound, prepared_vocab(&p, &ri))) {
    fprintf(stderr, "tfmc: out of memory\n");
    goto done;
  }
  rc = 0;
done:
  if (print_file_close(&print_file, rc == 0))
    rc = EXIT_USER;
  prepared_free(&p);
  return rc;
}

/* ---- tfmc attention: attention maps as a picture ---- */

/* The layer `tfmc attention --generate` draws by default: the last decoder
 * layer's cross-attention (what pytorch-seq2seq's display_attention
 * plots), or a decoder's last layer; "" for an encoder. Returns 0, or 1
 * after a message (the spec's errors). */
static int default_generation_layer(const char *path, char *buf, size_t n) {
  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, stderr);
  char err[1024];
  SrcFile *src = src_file_read(a, path, err, sizeof err);
  Spec *spec = NULL;
  if (!src)
    fprintf(stderr, "tfmc: %s\n", err);
  else
    diags_add_source(&d, src), spec = spec_parse(a, src, &d);
  *buf = 0; /* an encoder has none: compiling it for generation says why */
  if (spec && spec->model->arch != ARCH_ENCODER)
    snprintf(buf, n, "decoder.%lld%s", (long long)spec->model->layers_dec - 1,
             spec->model->arch == ARCH_ENCODER_DECODER ? ".cross" : "");
  arena_destroy(a);
  return spec ? 0 : 1;
}

static int cmd_attention(int argc, char **argv) {
  Opt o[] = {{"weights", true, NULL},   {"init", true, NULL},
             {"seed", true, NULL},      {"inputs", true, NULL},
             {"tokens", true, NULL},    {"text", true, NULL},
             {"vocab", true, NULL},     {"layer", true, NULL},
             {"head", true, NULL},      {"batch-row", true, NULL},
             {"o", true, NULL},         {"backend", true, NULL},
             {"tokenizer", true, NULL}, {"generate", true, NULL},
             {"sample", false, NULL},   {"temperature", true, NULL},
             {"top-k", true, NULL},     {"top-p", true, NULL},
             {"beams", true, NULL},     {"length-penalty", true, NULL},
             PASS_OPTS};
  Args args = {o, (int)(sizeof o / sizeof o[0]), {0}, 0};
  int olevel;
  int r = take_opt_level("attention", &args, &argc, argv, &olevel);
  if (!r)
    r = parse_args("attention", argc, argv, &args);
  if (r == 1) {
    puts("usage: tfmc attention SPEC.tfm (--weights W.safetensors | --init random [--seed N])\n"
         "                      (--inputs IN.safetensors | --tokens \"IDS\" |\n"
         "                       --text \"SYMBOLS\" --vocab V.txt | --text \"TEXT\" --tokenizer "
         "SPEC)\n"
         "                      [--vocab V.txt | --tokenizer SPEC]\n"
         "                      [--layer LAYER|all] [--head H|all] [--batch-row R]\n"
         "                      -o MAPS.svg|MAPS.html [--backend jit|interp]\n"
         "                      [--passes=LIST | -O0..-O3]\n"
         "       tfmc attention SPEC.tfm ... --generate N [--sample ...] [--layer decoder.N[.cross]]\n"
         "                      [--head H|all] -o MAPS.svg|MAPS.html\n\n"
         "Runs the model once, as 'tfmc run --attention' does, and draws its\n"
         "attention probabilities: one heatmap per layer (rows) and head\n"
         "(columns), queries down and keys across (cross-attention: target tokens\n"
         "down, source tokens across), labelled with the tokens (symbols of\n"
         "--vocab when given, ids otherwise), coloured by viridis on a fixed 0..1\n"
         "scale with a legend. --layer: encoder.N, decoder.N, decoder.N.cross or\n"
         "all (default); --head: one head or all (default); --batch-row: which\n"
         "sequence of the batch (default 0). -o writes SVG, or with .html the SVG\n"
         "in a minimal page; 'rsvg-convert MAPS.svg -o MAPS.png' makes a PNG.\n"
         "--generate N generates as 'tfmc run --generate' does (greedy, --sample or\n"
         "--beams) and draws one decoder layer (default: the last one's\n"
         "cross-attention, or a decoder's last layer): one heatmap per head, a row\n"
         "per generated token (the probabilities of the step that chose it), the\n"
         "source tokens across (a decoder: the prompt and the generated tokens).\n"
         "Executables built with --attention (tfmc build, emit-c) draw the same\n"
         "picture: EXE ... --attention-map MAPS.svg [--layer L] [--head H] [--batch-row R].");
    return 0;
  }
  if (r)
    return r;
  if (args.n_pos != 1)
    return usage_error("attention", "expected one spec file");
  const char *weights;
  uint64_t seed;
  if ((r = weights_source("attention", &args, &weights, &seed)))
    return r;
  RunInputs ri;
  if ((r = run_inputs_options("attention", &args, &ri)))
    return r;
  const char *out = opt(&args, "o"), *backend = opt(&args, "backend");
  const char *layer = opt(&args, "layer");
  char err[1024];
  if (!backend)
    backend = "jit";
  DriverStage stage;
  if (!backend_known(backend, &stage))
    return usage_error("attention", "unknown backend '%s' (available: jit, interp)", backend);
  if (!layer)
    layer = "all";
  const char *ins[] = {args.pos[0],          weights, ri.inputs, ri.vocab, ri.tokenizer_files[0],
                       ri.tokenizer_files[1]};
  char what[4200];
  snprintf(what, sizeof what, "-o %s", out ? out : "");
  if (out && *out && (r = refuse_overwrite("attention", what, out, false, ins, 6)))
    return r;
  /* the picture's options, checked as executables' --attention-map are */
  RtAttnRequest req;
  if ((r = rt_attnmap_request("-o", out, layer, opt(&args, "head"), opt(&args, "batch-row"), &req,
                              err, sizeof err)))
    return r == 2 ? usage_error("attention", "%s", err)
                  : (fprintf(stderr, "tfmc attention: %s\n", err), EXIT_USER);
  if (opt(&args, "generate")) {
    if (opt(&args, "batch-row"))
      return usage_error("attention", "--generate draws one sequence: no --batch-row");
    char last[64];
    if (!opt(&args, "layer") && default_generation_layer(args.pos[0], last, sizeof last))
      return EXIT_USER;
    GenDraw draw = {opt(&args, "layer") ? layer : *last ? last : NULL, &req};
    return run_generate(&args, olevel, weights, seed, &draw);
  }
  static const char *const gen_only[] = {"sample", "temperature", "top-k", "top-p", "beams",
                                         "length-penalty"};
  for (size_t i = 0; i < sizeof gen_only / sizeof *gen_only; i++)
    if (opt(&args, gen_only[i]))
      return usage_error("attention", "--%s goes with --generate", gen_only[i]);
  PassPipeline pl;
  Diags d;
  PassContext pctx = {.diags = &d};
  PrintFile print_file;
  const char *files[] = {args.pos[0], weights, ri.inputs, ri.vocab, out};
  if ((r = pass_options("attention", &args, olevel, COMPILE_DEFAULT_LEVEL, files, 5, &pl, &pctx,
                        &print_file)))
    return r;

  Prepared p = {.a = arena_create()};
  diags_init(&d, p.a, stderr);
  int rc = EXIT_USER;
  DriverOptions dopt = {.attention = layer,
                        .weights = weights,
                        .seed = seed,
                        .passes = &pl,
                        .pass_ctx = &pctx,
                        .stage = stage};
  if (prepare_run(&p, &d, &args, &ri, &dopt))
    goto done;
  if (backend_run(backend, &p.c, &p.bound, &(ExecOptions){0}, NULL, err, sizeof err) ||
      rt_attnmap_draw_run("tfmc", p.c.info, &p.bound, prepared_vocab(&p, &ri), &req, err,
                          sizeof err)) {
    fprintf(stderr, "tfmc: %s\n", err);
    goto done;
  }
  rc = 0;
done:
  if (print_file_close(&print_file, rc == 0))
    rc = EXIT_USER;
  prepared_free(&p);
  return rc;
}

/* ---- tfmc compare ---- */

/* Tensor t's values as doubles into dst (numel of them): a floating-point
 * tensor through rt_st_read_f32, an integer one (ids, lengths, masks, as
 * generation writes them) through rt_st_read_i32, exactly. Returns 0, or
 * non-zero with a message. */
static int compare_read(const RtStTensor *t, double *dst, char *err, size_t errlen) {
  int64_t n = rt_st_numel(t);
  bool is_float = t->dtype == RT_F32 || t->dtype == RT_F16 || t->dtype == RT_BF16 ||
                  t->dtype == RT_F64;
  void *buf = malloc((size_t)n * 4 + 4);
  if (!buf)
    return rt_errorf(err, errlen, "out of memory");
  int rc = is_float ? rt_st_read_f32(t, buf, err, errlen)
                    : rt_st_read_i32(t, buf, INT32_MIN, INT32_MAX, err, errlen);
  for (int64_t k = 0; !rc && k < n; k++)
    dst[k] = is_float ? (double)((float *)buf)[k] : (double)((int32_t *)buf)[k];
  free(buf);
  return rc;
}

static int cmd_compare(int argc, char **argv) {
  Opt o[] = {{"atol", true, NULL}, {"rtol", true, NULL}};
  Args args = {o, 2, {0}, 0};
  int r = parse_args("compare", argc, argv, &args);
  if (r == 1) {
    puts("usage: tfmc compare OUT.safetensors REF.safetensors [--atol A] [--rtol R]\n\n"
         "Compares every tensor of REF with the tensor of the same name in OUT:\n"
         "passes when |out - ref| <= atol + rtol * |ref| elementwise (defaults\n"
         "1e-4 and 1e-4) and shapes match. Prints each tensor's max errors; exits 1\n"
         "on any mismatch, missing tensor or non-finite value. Integer tensors (the\n"
         "ids and lengths generation writes) are compared by value, as numbers.");
    return 0;
  }
  if (r)
    return r;
  if (args.n_pos != 2)
    return usage_error("compare", "expected two safetensors files");
  double atol = 1e-4, rtol = 1e-4;
  const char *tols[2] = {opt(&args, "atol"), opt(&args, "rtol")};
  double *dst[2] = {&atol, &rtol};
  for (int i = 0; i < 2; i++) {
    if (!tols[i])
      continue;
    char *e;
    *dst[i] = strtod(tols[i], &e);
    if (*e || !*tols[i] || !(*dst[i] >= 0))
      return usage_error("compare", "tolerances are numbers >= 0");
  }
  RtSafetensors *sa = NULL, *sb = NULL;
  char err[1024];
  int rc = EXIT_USER;
  if (rt_st_open(args.pos[0], &sa, err, sizeof err) ||
      rt_st_open(args.pos[1], &sb, err, sizeof err)) {
    fprintf(stderr, "tfmc: %s\n", err);
    goto done;
  }
  int bad = 0;
  for (int i = 0; i < rt_st_count(sb); i++) {
    const RtStTensor *ref = rt_st_get(sb, i);
    const RtStTensor *got = rt_st_find(sa, ref->name);
    char sr[96], sg[96];
    shape_str(sr, sizeof sr, ref->rank, ref->shape);
    if (!got) {
      printf("%-14s %s: MISSING from %s\n", ref->name, sr, args.pos[0]);
      bad++;
      continue;
    }
    shape_str(sg, sizeof sg, got->rank, got->shape);
    if (strcmp(sr, sg) != 0) {
      printf("%-14s shape %s, reference %s: MISMATCH\n", ref->name, sg, sr);
      bad++;
      continue;
    }
    int64_t n = rt_st_numel(ref);
    double *x = malloc((size_t)n * sizeof *x + 8), *y = malloc((size_t)n * sizeof *y + 8);
    if (!x || !y || compare_read(got, x, err, sizeof err) ||
        compare_read(ref, y, err, sizeof err)) {
      printf("%-14s %s: cannot read: %s\n", ref->name, sr, (!x || !y) ? "out of memory" : err);
      free(x);
      free(y);
      bad++;
      continue;
    }
    double max_abs = 0, worst = 0;
    int64_t worst_i = 0, fails = 0;
    for (int64_t k = 0; k < n; k++) {
      double diff = fabs(x[k] - y[k]);
      if (!isfinite(x[k]) || !isfinite(y[k]))
        diff = INFINITY;
      double tol = atol + rtol * fabs(y[k]);
      double ratio = diff == 0 ? 0 : tol > 0 ? diff / tol : INFINITY;
      if (diff > max_abs)
        max_abs = diff;
      if (ratio > worst)
        worst = ratio, worst_i = k;
      fails += !(diff <= tol);
    }
    printf("%-14s %s: max |diff| %.3g, worst at [%lld] (%.7g vs %.7g), %lld over tolerance: %s\n",
           ref->name, sr, max_abs, (long long)worst_i, n ? x[worst_i] : 0.0, n ? y[worst_i] : 0.0,
           (long long)fails, fails ? "FAIL" : "ok");
    bad += fails > 0;
    free(x);
    free(y);
  }
  for (int i = 0; i < rt_st_count(sa); i++)
    if (!rt_st_find(sb, rt_st_get(sa, i)->name))
      printf("%-14s (not in the reference; not compared)\n", rt_st_get(sa, i)->name);
  printf("tolerance |out - ref| <= %g + %g * |ref|: %s\n", atol, rtol, bad ? "FAIL" : "ok");
  rc = bad ? EXIT_USER : 0;
done:
  if (sa)
    rt_st_close(sa);
  if (sb)
    rt_st_close(sb);
  return rc;
}

/* ---- tfmc build / tfmc emit-c: compiled artefacts ---- */

/* The shared front of build and emit-c: the pass options (default -O2;
 * --print-file must not be one of the n files) and the driver, to packed
 * weights. *print_file is opened for --print-file; the caller ends it with
 * print_file_close once it knows whether the command succeeded (also after
 * a failure here). Returns 0, EXIT_USAGE or EXIT_USER (after a message). */
/* Whether a spec generates (arch decoder or encoder_decoder with a
 * language-model head): then build and emit-c make generation artefacts. */
static bool spec_generates(const Spec *spec) {
  const ModelSpec *m = spec ? spec->model : NULL;
  return m && m->arch != ARCH_ENCODER && (m->head == HEAD_LOGITS || m->head == HEAD_LOG_SOFTMAX);
}

/* --max-beams K (build, emit-c): the step graph's batch rows, 1..64
 * (default 4); -1 after a usage error. */
static int max_beams_opt(const char *cmd, const Args *args) {
  const char *s = opt(args, "max-beams");
  if (!s) return 4;
  char *e;
  long v = strtol(s, &e, 10);
  if (*e || !*s || v < 1 || v > RT_GEN_MAX_BEAMS) {
    usage_error(cmd, "--max-beams takes an integer in 1..%d", RT_GEN_MAX_BEAMS);
    return -1;
  }
  return (int)v;
}

static int compile_model(Arena *a, Diags *d, const char *cmd, const Args *args, int olevel,
                         const char *weights, uint64_t seed, const char *const *files, int n,
                         PrintFile *print_file, Compiled *c, CompiledGeneration *gen,
                         int max_beams) {
  PassPipeline pl;
  PassContext pctx = {.diags = d};
  int rc = pass_options(cmd, args, olevel, COMPILE_DEFAULT_LEVEL, files, n, &pl, &pctx, print_file);
  if (rc)
    return rc;
  char err[1024];
  OutputNames on;
  if ((rc = output_names(cmd, args, &on)))
    return rc;
  DriverOptions dopt = {.attention = opt(args, "attention"),
                        .weights = weights,
                        .seed = seed,
                        .passes = &pl,
                        .pass_ctx = &pctx,
                        .stage = DRIVER_PACKED,
                        .strict = opt(args, "strict") != NULL,
                        .outputs = on.names,
                        .n_outputs = on.n};
  rc = driver_compile_file(a, d, args->pos[0], &dopt, c, err, sizeof err) ? EXIT_USER : 0;
  if (rc)
    compile_failed(err);
  if (gen)
    gen->step.prog = NULL; /* none: not a generating spec */
  if (!rc && gen && spec_generates(c->spec)) {
    /* the generation programs too, as `tfmc run --generate` compiles them,
     * on the weights the forward program loaded (every param of the model,
     * checked against it): reading the checkpoint again cost gpt2-small
     * 0.4-1.2 s and another 500 MB, and repeated its NaN/Inf warnings; the
     * programs read the forward program's packed weights where they are
     * (packed_like) and pack only what it lacks: a decoder's step nothing,
     * so its image is the forward block (packing it again and copying it
     * into an image cost gpt2-small 1 GB more and 1.5 s); with
     * --attention of one decoder layer its step outputs that layer's rows */
    const char *layer = dopt.attention;
    DriverOptions gopt = {.attention = layer && strncmp(layer, "decoder.", 8) == 0 ? layer : NULL,
                          .weights = weights,
                          .seed = seed,
                          .passes = &pl,
                          .pass_ctx = &pctx,
                          .stage = DRIVER_PACKED,
                          .strict = dopt.strict,
                          .step_rows = max_beams,
                          .weight_set = c->w,
                          .packed_like = c};
    rc = driver_compile_generation(a, d, args->pos[0], &gopt, gen, err, sizeof err) ? EXIT_USER : 0;
    if (rc)
      compile_failed(err);
  }
  return rc;
}

static int cmd_build(int argc, char **argv) {
  Opt o[] = {{"weights", true, NULL},        {"init", true, NULL},
             {"seed", true, NULL},           {"o", true, NULL},
             {"embed-weights", false, NULL}, {"keep", false, NULL},
             {"attention", true, NULL},      {"strict", false, NULL},
             {"output", true, NULL, true},   {"max-beams", true, NULL},
             PASS_OPTS};
  Args args = {o, (int)(sizeof o / sizeof o[0]), {0}, 0};
  int olevel;
  int r = take_opt_level("build", &args, &argc, argv, &olevel);
  if (!r)
    r = parse_args("build", argc, argv, &args);
  if (r == 1) {
    puts("usage: tfmc build SPEC.tfm (--weights W.safetensors | --init random [--seed N])\n"
         "                  -o EXE [--embed-weights] [--keep] [--attention LAYER] [--strict]\n"
         "                  [--output NAME[,NAME]] [--max-beams K]\n"
         "                  [--passes=LIST | -O0..-O3] [--print-after=PASS|all\n"
         "                  [--print-file FILE]] [--pass-stats]\n\n"
         "Compiles the model to a standalone executable for this machine: an object\n"
         "file from LLVM (optimised for this CPU) linked with tfmc's runtime by the\n"
         "system C compiler ($CC, default cc). The weights are packed into EXE.weights\n"
         "next to it (mapped read-only at start-up; a wrong or corrupt file is\n"
         "refused), or into the executable itself with --embed-weights. The\n"
         "executable needs no LLVM and no tfmc:\n"
         "  EXE --inputs IN.safetensors --outputs OUT.safetensors [--weights FILE]\n"
         "      [--threads N] [--repeat N] [--profile]   (EXE --help says more)\n"
         "A decoder or encoder_decoder spec with a logits head makes an executable that\n"
         "also generates, with the options of 'tfmc run --generate' (EXE --generate N\n"
         "--tokens \"IDS\" ...; EXE --help lists them); --max-beams K (1..64, default 4)\n"
         "is the largest --beams it takes (the KV cache's rows). With --attention\n"
         "decoder.N[.cross] its --generate runs also write that layer's\n"
         "attention rows to --outputs, as 'tfmc run --generate --attention'.\n"
         "Built with --attention, EXE --attention-map MAPS.svg draws the attention\n"
         "maps as 'tfmc attention' does (with --generate, the generation's rows).\n"
         "--keep leaves the intermediate files in EXE.build/.\n"
         "--output NAME (repeatable, or a comma list) makes a named intermediate\n"
         "(embeddings, enc.N.out, encoder.out, hidden, pooled, ...: 'tfmc check SPEC'\n"
         "lists them) an output of the executable too, as 'tfmc run --output' does.\n"
         "--passes / -O choose the graph and loop passes, --disable-pass=a,b takes\n"
         "some out, --tile / --target-cache / --target-threads steer the tile pass\n"
         "(see 'tfmc ir --help'); default -O2.");
    return 0;
  }
  if (r)
    return r;
  if (args.n_pos != 1)
    return usage_error("build", "expected one spec file");
  const char *weights, *exe = opt(&args, "o");
  uint64_t seed;
  if ((r = weights_source("build", &args, &weights, &seed)))
    return r;
  if (!exe || !*exe)
    return usage_error("build", "give the executable's path with -o EXE");
  bool embed = opt(&args, "embed-weights") != NULL, keep = opt(&args, "keep") != NULL;
  /* EXE, EXE.weights (written, or removed when embedded) and EXE.build/ */
  const char *ins[] = {args.pos[0], weights};
  char what[3][8500], path[2][4200];
  snprintf(what[0], sizeof what[0], "-o %s", exe);
  snprintf(path[0], sizeof path[0], "%s.weights", exe);
  snprintf(what[1], sizeof what[1], "%s (the weights beside -o %s)", path[0], exe);
  snprintf(path[1], sizeof path[1], "%s.build", exe);
  snprintf(what[2], sizeof what[2], "%s/ (the intermediates of -o %s)", path[1], exe);
  if ((r = refuse_overwrite("build", what[0], exe, false, ins, 2)) ||
      (r = refuse_overwrite("build", what[1], path[0], false, ins, 2)) ||
      (r = refuse_overwrite("build", what[2], path[1], true, ins, 2)))
    return r;

  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, stderr);
  int rc = EXIT_USER;
  char err[1024];
  Compiled c;
  CompiledGeneration gen;
  RtGenInfo *gi = NULL;
  float *image = NULL;
  const char *files[] = {args.pos[0], weights, exe, path[0]};
  PrintFile print_file = {0};
  int max_beams = max_beams_opt("build", &args);
  if (max_beams < 0) {
    rc = EXIT_USAGE;
    goto done;
  }
  if ((rc = compile_model(a, &d, "build", &args, olevel, weights, seed, files, 4, &print_file, &c,
                          &gen, max_beams)))
    goto done;
  rc = EXIT_USER;
  if (gen.step.prog && driver_generation_info(a, &c, &gen, &gi, &image, err, sizeof err)) {
    fprintf(stderr, "tfmc: %s\n", err);
    goto done;
  }
  BuildOptions bo = {exe, embed, keep, TFMC_SOURCE_DIR, TFMC_RT_LIB};
  if (gi ? backend_build_generation(a, &c, &gen, gi, image, &bo, err, sizeof err)
         : backend_build_executable(a, c.prog, c.info, c.packed, &bo, err, sizeof err)) {
    fprintf(stderr, "tfmc: %s\n", err);
    goto done;
  }
  fprintf(stderr, "tfmc: built %s (%s weights, %lld-byte activation arena)\n", exe,
          embed ? "embedded" : arena_printf(a, "%s.weights", exe), (long long)c.info->arena_bytes);
  if (gi)
    fprintf(stderr,
            "tfmc: it generates (%s --generate N): %s arena%s %lld bytes, KV cache %lld "
            "bytes (%lld positions, up to %d beams)\n",
            exe, gen.encoder_decoder ? "encode + step" : "step", gen.encoder_decoder ? "s" : "",
            (long long)(gen.step.info->arena_bytes +
                        (gen.encoder_decoder ? gen.encode.info->arena_bytes : 0)),
            (long long)gen.step.info->state_bytes, (long long)gi->states[0].positions, max_beams);
  rc = 0;
done:
  if (print_file_close(&print_file, rc == 0))
    rc = EXIT_USER;
  arena_destroy(a);
  return rc;
}

/* What `emit-c --static` wrote: memory (RAM: the region; flash: weights)
 * and code (kernels, the runtime pieces linked). */
static void print_static_summary(const char *dir, const LoopProgram *p, const RtModelInfo *info,
                                 bool embed, const RtGenInfo *gi, const LoopProgram *step,
                                 const LoopProgram *encode) {
  CStaticMemory m;
  c_static_memory(info, &m);
  bool used[LC_CALLEE_COUNT];
  const char *files[32];
  char err[256];
  const LoopProgram *progs[3] = {p, step, encode};
  int n = c_static_check_all(progs, 3, used, err, sizeof err)
              ? 0
              : c_static_runtime(used, gi != NULL, files, 32);
  int fns = 0, kernels = 0;
  for (int k = 0; k < 3; k++)
    for (int i = 0; progs[k] && i < progs[k]->n_kernels; i++) {
      fns += progs[k]->kernels[i].shares < 0;
      kernels++;
    }
  fprintf(stderr,
          "tfmc: static library project in %s (make; make size)\n"
          "  RAM    TFMC_MEM_BYTES %lld: arena %lld, state %lld, masks %lld, header %lld "
          "(+64 alignment)\n",
          dir, (long long)m.total, (long long)m.arena, (long long)m.state, (long long)m.masks,
          (long long)m.header);
  if (gi) {
    CStaticGenMemory g;
    if (!c_static_gen_memory(gi->step, gi->encode, &g))
      fprintf(stderr,
              "  RAM    TFMC_GEN_MEM_BYTES %lld (generation, batch 1): arena %lld, KV cache %lld "
              "(%lld positions), step buffers %lld, header %lld (+64 alignment)\n",
              (long long)g.total, (long long)g.arena, (long long)g.state,
              (long long)(gi->n_states ? gi->states[0].positions : 0), (long long)g.stepper,
              (long long)g.header);
  }
  fprintf(stderr,
          "  flash  weights %lld bytes (%s); code: %d kernels in %d functions (model.c%s), runtime",
          (long long)(64 + 4 * (gi ? gi->weights : info)->weights_floats),
          embed ? "weights.c, const" : "the caller's image", kernels, fns,
          gi ? (gi->encode ? ", encode.c, step.c" : ", step.c") : "");
  for (int i = 0; i < n; i++)
    if (ends_with(files[i], ".c"))
      fprintf(stderr, " %s", files[i]);
  fputc('\n', stderr);
}

/* `emit-c --static --size-cc CC`: each object's sections and the total,
 * compiled as the project's Makefile compiles it. Returns 0 or 1 (said). */
static int print_static_size(const char *dir, const LoopProgram *p, const LoopProgram *step,
                             const LoopProgram *encode, bool embed, const char *cc) {
  char err[1024], path[40][64];
  const char *files[40];
  int n = c_static_sources(p, step, encode, embed, path, 40);
  TFMC_ASSERT(n > 0);
  for (int i = 0; i < n; i++) files[i] = path[i];
  CSize sz[40];
  if (c_static_measure(dir, cc, files, n, sz, err, sizeof err)) {
    fprintf(stderr, "tfmc emit-c: the project in %s is complete, but measuring its size failed: %s\n",
            dir, err);
    return 1;
  }
  fprintf(stderr, "  code size with %s (bytes):\n  %-26s %9s %7s %7s\n", cc, "object", "text",
          "data", "bss");
  CSize code = {0, 0, 0};
  for (int i = 0; i < n; i++) {
    bool w = strcmp(files[i], "weights.c") == 0;
    fprintf(stderr, "  %-26s %9lld %7lld %7lld%s\n", files[i], (long long)sz[i].text,
            (long long)sz[i].data, (long long)sz[i].bss, w ? "  (the weights, flash)" : "");
    if (w) continue;
    code.text += sz[i].text;
    code.data += sz[i].data;
    code.bss += sz[i].bss;
  }
  fprintf(stderr, "  %-26s %9lld %7lld %7lld\n", "code (all but the weights)", (long long)code.text,
          (long long)code.data, (long long)code.bss);
  return 0;
}

static int cmd_emit_c(int argc, char **argv) {
  Opt o[] = {{"weights", true, NULL},
             {"init", true, NULL},
             {"seed", true, NULL},
             {"o", true, NULL},
             {"embed-weights", false, NULL},
             {"attention", true, NULL},
             {"force", false, NULL},
             {"strict", false, NULL},
             {"static", false, NULL},
             {"size-cc", true, NULL},
             {"output", true, NULL, true},
             {"max-beams", true, NULL},
             PASS_OPTS};
  Args args = {o, (int)(sizeof o / sizeof o[0]), {0}, 0};
  int olevel;
  int r = take_opt_level("emit-c", &args, &argc, argv, &olevel);
  if (!r)
    r = parse_args("emit-c", argc, argv, &args);
  if (r == 1) {
    puts("usage: tfmc emit-c SPEC.tfm (--weights W.safetensors | --init random [--seed N])\n"
         "                   -o DIR [--force] [--embed-weights] [--static [--size-cc \"CC FLAGS\"]]\n"
         "                   [--attention LAYER] [--strict] [--output NAME[,NAME]] [--max-beams K]\n"
         "                   [--passes=LIST | -O0..-O3] [--print-after=PASS|all\n"
         "                   [--print-file FILE]] [--pass-stats] [--tile KEY=VALUE]\n"
         "                   [--target-cache L1=S,L2=S,L3=S] [--target-threads N]\n\n"
         "Writes a self-contained C99 project into DIR: the model's C source (one\n"
         "function per kernel), the runtime sources, the packed weights (or, with\n"
         "--embed-weights, weights as a C array), a Makefile and a CMakeLists.txt\n"
         "building a standalone executable and a static library with a C API\n"
         "(model.h). `make` builds with BLAS (cblas), `make NO_BLAS=1` without.\n"
         "DIR is refused when it exists, is not empty and was not written by tfmc\n"
         "(DIR/.tfmc-project marks ours) unless --force; only the project's files\n"
         "are replaced, all together when the emission succeeded, and never one of\n"
         "the command's inputs.\n"
         "--static writes a library for hosts without an OS instead (a\n"
         "microcontroller): no heap, threads, files or stdio, one caller-provided\n"
         "memory region of TFMC_MEM_BYTES (model.h; printed here), weights as a\n"
         "const array (--embed-weights) or the caller's pointer to the packed image,\n"
         "single-threaded portable kernels, only the runtime pieces the model calls;\n"
         "`make` builds libmodel.a, `make size` prints its sections.\n"
         "A decoder or encoder_decoder spec with a logits head makes a project that\n"
         "also generates: model.h includes model_gen.h (the step API), the executable\n"
         "takes 'tfmc run --generate's options; --max-beams K as on build. With\n"
         "--static the step API is the static one: one sequence at a time in a second\n"
         "region of TFMC_GEN_MEM_BYTES (the KV cache at max_len; printed here), the\n"
         "caller picks each token (greedy); no sampling or beams, no --max-beams.\n"
         "--size-cc \"CC FLAGS\" (with --static) compiles the project with that\n"
         "compiler and flags, as its Makefile does, and prints the code size of\n"
         "each object (text, data, bss bytes) and the total; e.g. --size-cc\n"
         "\"arm-none-eabi-gcc -Os -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16\".\n"
         "The GEMM blocks are sized for the target machine's caches: a generic\n"
         "one (L1=32K,L2=512K,L3=8M, 4 threads) unless --target-cache and\n"
         "--target-threads describe it.\n"
         "--passes / -O choose the graph and loop passes, --disable-pass=a,b takes\n"
         "some out, --tile / --target-cache / --target-threads steer the tile pass\n"
         "(see 'tfmc ir --help'); default -O2.");
    return 0;
  }
  if (r)
    return r;
  if (args.n_pos != 1)
    return usage_error("emit-c", "expected one spec file");
  const char *weights, *dir = opt(&args, "o");
  uint64_t seed;
  if ((r = weights_source("emit-c", &args, &weights, &seed)))
    return r;
  if (!dir || !*dir)
    return usage_error("emit-c", "give the output directory with -o DIR");
  if (opt(&args, "size-cc") && !opt(&args, "static"))
    return usage_error("emit-c", "--size-cc measures a --static project");
  if (opt(&args, "max-beams") && opt(&args, "static"))
    return usage_error("emit-c", "--static generates one sequence at a time (batch 1, the caller "
                                 "picks each token: greedy decoding); --max-beams does not apply");
  char err0[8500];
  if (c_project_dir_check(dir, opt(&args, "force") != NULL, err0, sizeof err0)) {
    fprintf(stderr, "tfmc emit-c: %s\n", err0 + (strncmp(err0, "c: ", 3) == 0 ? 3 : 0));
    return EXIT_USER;
  }
  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, stderr);
  int rc = EXIT_USER;
  char err[1024];
  Compiled c;
  CompiledGeneration gen;
  RtGenInfo *gi = NULL;
  float *image = NULL;
  const char *files[] = {args.pos[0], weights};
  PrintFile print_file = {0};
  bool stat = opt(&args, "static") != NULL;
  int max_beams = max_beams_opt("emit-c", &args);
  if (max_beams < 0) {
    rc = EXIT_USAGE;
    goto done;
  }
  /* --static: the step planned for one sequence (batch 1): the KV cache
   * and the arenas in the caller's region stay small */
  if ((rc = compile_model(a, &d, "emit-c", &args, olevel, weights, seed, files, 2, &print_file, &c,
                          &gen, stat ? 1 : max_beams)))
    goto done;
  rc = EXIT_USER;
  for (int o = 0; stat && gen.step.prog && o < gen.step.info->n_outputs; o++)
    if (strcmp(gen.step.info->outputs[o].name, "attention") == 0) {
      fprintf(stderr, "tfmc emit-c: --static: the static step API keeps no attention rows "
                      "(no tfmc_gen_attention); --attention %s is for the hosted project\n",
              opt(&args, "attention"));
      goto done;
    }
  if (gen.step.prog && driver_generation_info(a, &c, &gen, &gi, &image, err, sizeof err)) {
    fprintf(stderr, "tfmc: %s\n", err);
    goto done;
  }
  const char *ins[] = {args.pos[0], weights, opt(&args, "print-file"), "/proc/self/exe"};
  CEmitOptions co = {opt(&args, "embed-weights") != NULL,
                     TFMC_SOURCE_DIR "/runtime",
                     opt(&args, "force") != NULL,
                     ins,
                     4,
                     stat,
                     gi,
                     gi ? gen.step.prog : NULL,
                     gi && gen.encoder_decoder ? gen.encode.prog : NULL,
                     image};
  if (c_emit_project(c.prog, c.info, c.packed, &co, dir, err, sizeof err)) {
    fprintf(stderr, "tfmc: %s\n", err);
    goto done;
  }
  if (co.static_mode)
    print_static_summary(dir, c.prog, c.info, co.embed_weights, gi, co.step_prog, co.encode_prog);
  if (co.static_mode && opt(&args, "size-cc") &&
      print_static_size(dir, c.prog, co.step_prog, co.encode_prog, co.embed_weights,
                        opt(&args, "size-cc")))
    goto done;
  rc = 0;
done:
  if (print_file_close(&print_file, rc == 0))
    rc = EXIT_USER;
  arena_destroy(a);
  return rc;
}

/* ---- tfmc bench: what each pass of a pipeline buys ---- */

/* --name N for a count in lo..hi (absent: dflt); -1 after a usage error. */
static int64_t bench_count(const Args *args, const char *name, int64_t lo, int64_t hi,
                           int64_t dflt) {
  const char *s = opt(args, name);
  if (!s)
    return dflt;
  char *e;
  errno = 0;
  long long v = strtoll(s, &e, 10);
  if (*e || errno || !*s || v < lo || v > hi) {
    usage_error("bench", "--%s takes %lld..%lld", name, (long long)lo, (long long)hi);
    return -1;
  }
  return v;
}

static int cmd_bench(int argc, char **argv) {
  Opt o[] = {{"weights", true, NULL}, {"init", true, NULL}, {"seed", true, NULL},
             {"batch", true, NULL},   {"seq", true, NULL},  {"rounds", true, NULL},
             {"threads", true, NULL}, {"json", true, NULL}};
  Args args = {o, (int)(sizeof o / sizeof o[0]), {0}, 0};
  int olevel;
  int r = take_opt_level("bench", &args, &argc, argv, &olevel);
  if (!r)
    r = parse_args("bench", argc, argv, &args);
  if (r == 1) {
    puts("usage: tfmc bench SPEC.tfm (--weights W.safetensors | --init random [--seed N])\n"
         "                  [--batch B] [--seq S] [-O1|-O2|-O3] [--rounds N] [--threads T]\n"
         "                  [--json FILE]\n\n"
         "Measures what each pass of an optimisation level's pipeline buys. The model\n"
         "is compiled for the JIT with the level's whole pipeline (default -O2), with\n"
         "each of its passes left out in turn, and with no passes (-O0); all run in\n"
         "this process on the same inputs (batch B, default 1; every sequence length\n"
         "S, default the spec's maximum; ids drawn at random, no padding): one warm-up\n"
         "each, then N rounds (default 10) that give every variant a turn, round-robin:\n"
         "one untimed run (its threads wake, its data returns to the caches), one timed.\n"
         "Per pass it prints the kernels it removes and the activation bytes no longer\n"
         "written per forward (counted from the loop IR at these dims: kernels run,\n"
         "bytes stored into the arena and the outputs), the median ms with and without\n"
         "it and the ratio without/with; then the whole level against -O0 and the\n"
         "kernels per forward of both, and the noise (how far the middle half of one\n"
         "variant's runs spreads around its median: ratios closer to 1 say nothing).\n"
         "--json FILE writes the same as JSON (never over an input; complete or not at all).\n"
         "--threads T: the JIT's worker threads, 0..256 (0, the default: one per CPU).\n"
         "Times are only comparable within one run: read the ratios.");
    return 0;
  }
  if (r)
    return r;
  if (args.n_pos != 1)
    return usage_error("bench", "expected one spec file");
  if (ends_with(args.pos[0], ".tfir"))
    return usage_error("bench", "expected a spec (.tfm): bench compiles it with each pipeline");
  if (olevel == 0)
    return usage_error("bench", "-O0 runs no passes; give -O1, -O2 or -O3 to measure theirs");
  const char *weights, *json = opt(&args, "json");
  uint64_t seed;
  if ((r = weights_source("bench", &args, &weights, &seed)))
    return r;
  int64_t batch = bench_count(&args, "batch", 1, INT32_MAX, 1);
  int64_t seq = bench_count(&args, "seq", 1, INT32_MAX, 0);
  int64_t rounds = bench_count(&args, "rounds", 1, 100000, 10);
  int64_t threads = bench_count(&args, "threads", 0, 256, 0);
  if (batch < 0 || seq < 0 || rounds < 0 || threads < 0)
    return EXIT_USAGE;
  if (json && !*json)
    return usage_error("bench", "--json takes a file name");
  const char *ins[] = {args.pos[0], weights};
  char what[4200];
  snprintf(what, sizeof what, "--json %s", json ? json : "");
  if (json && (r = refuse_overwrite("bench", what, json, false, ins, 2)))
    return r;
  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, stderr);
  int rc = EXIT_USER;
  char err[1024];
  RtOut out = {0}; /* --json */
  if (!seq) {      /* the longest length every sequence symbol (S, T) takes */
    Compiled c;
    DriverOptions dopt = {.no_weights = true, .stage = DRIVER_GRAPH};
    if (driver_compile_file(a, &d, args.pos[0], &dopt, &c, err, sizeof err)) {
      compile_failed(err);
      goto done;
    }
    for (int i = 0; i < c.g->n_syms; i++)
      if (strcmp(c.g->syms[i].name, "B") != 0 && (!seq || c.g->syms[i].max < seq))
        seq = c.g->syms[i].max;
    if (!seq)
      seq = 1;
  }
  /* the JSON file is opened before the work (a path that cannot be written
   * fails at once) and gets its name only when complete (runtime/rt_file.h) */
  if (json && rt_out_open(&out, json, 0, err, sizeof err)) {
    fprintf(stderr, "tfmc: --json %s: %s\n", json, err);
    goto done;
  }
  BenchOptions bo = {args.pos[0], weights, seed,        olevel < 0 ? COMPILE_DEFAULT_LEVEL : olevel,
                     batch,       seq,     (int)rounds, (int)threads,
                     isatty(2)};
  BenchResult res;
  if (bench_run(a, &d, &bo, &res, err, sizeof err)) {
    compile_failed(err);
    goto done;
  }
  bench_print(stdout, &res);
  if (json) {
    size_t len;
    char *text = bench_json(&res, &len);
    int wrc = text ? 0 : rt_errorf(err, sizeof err, "out of memory");
    if (!wrc && rt_file_write_all(out.fd, text, len))
      wrc = rt_errorf(err, sizeof err, "cannot write %s: %s", json, strerror(errno));
    if (!wrc)
      wrc = rt_out_commit(&out, err, sizeof err);
    free(text);
    if (wrc) {
      fprintf(stderr, "tfmc: --json %s: %s\n", json, err);
      goto done;
    }
  }
  rc = 0;
done:
  rt_out_abort(&out);
  arena_destroy(a);
  return rc;
}

/* ---- tfmc import-hf ---- */

static int cmd_import_hf(int argc, char **argv) {
  Opt o[] = {{"o", true, NULL},
             {"name", true, NULL},
             {"max-batch", true, NULL},
             {"force", false, NULL},
             {"weights", true, NULL}};
  Args args = {o, (int)(sizeof o / sizeof o[0]), {0}, 0};
  int r = parse_args("import-hf", argc, argv, &args);
  if (r == 1) {
    puts("usage: tfmc import-hf CONFIG.json [-o MODEL.tfm [--force]] [--name NAME]\n"
         "                      [--max-batch N] [--weights W.safetensors]\n\n"
         "Writes a spec (model block and weights block) for a Hugging Face checkpoint\n"
         "from its config.json: model_type bert (BertModel, BertForSequenceClassification,\n"
         "BertForMaskedLM, BertForPreTraining), distilbert (DistilBertModel,\n"
         "DistilBertForMaskedLM) or gpt2 (GPT2Model, GPT2LMHeadModel). The\n"
         "architectures field picks the head and the prefix (preset root) the\n"
         "checkpoint's tensors sit under, unless the checkpoint is at hand (--weights,\n"
         "or model.safetensors beside the config): then the root is the prefix of its\n"
         "word embedding. Anything the spec cannot express is refused with the\n"
         "reason. Without -o the spec goes to stdout; -o does not overwrite\n"
         "an existing file without --force, and never the config. Then:\n"
         "  tfmc run MODEL.tfm --weights DIR/model.safetensors --inputs IN.safetensors");
    return 0;
  }
  if (r)
    return r;
  if (args.n_pos != 1)
    return usage_error("import-hf", "expected one config.json");
  const char *config = args.pos[0], *out = opt(&args, "o"), *name = opt(&args, "name");
  bool force = opt(&args, "force") != NULL;
  if (out && !*out)
    return usage_error("import-hf", "-o takes a file name");
  if (force && !out)
    return usage_error("import-hf", "--force goes with -o");
  HfImportOptions io = {name, 0};
  if (name) {
    bool ok = (*name >= 'a' && *name <= 'z') || (*name >= 'A' && *name <= 'Z') || *name == '_';
    for (const char *p = name; *p && ok; p++)
      ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '_';
    if (!ok)
      return usage_error("import-hf", "--name takes an identifier (letters, digits, _)");
  }
  if (opt(&args, "max-batch")) {
    char *e;
    errno = 0;
    long v = strtol(opt(&args, "max-batch"), &e, 10);
    if (*e || errno || v < 1 || v > 65536 || !*opt(&args, "max-batch"))
      return usage_error("import-hf", "--max-batch takes 1..65536");
    io.max_batch = v;
  }
  const char *weights = opt(&args, "weights");
  if (weights && !*weights)
    return usage_error("import-hf", "--weights takes a file name");
  char beside[4096]; /* the checkpoint beside the config, if there is one */
  const char *slash = strrchr(config, '/');
  int n = snprintf(beside, sizeof beside, "%.*smodel.safetensors",
                   slash ? (int)(slash - config + 1) : 0, config);
  struct stat bs;
  if (!weights && n > 0 && (size_t)n < sizeof beside && stat(beside, &bs) == 0 &&
      S_ISREG(bs.st_mode))
    weights = beside;
  if (out && (strcmp(out, config) == 0 || same_file(out, config) ||
              (weights && (strcmp(out, weights) == 0 || same_file(out, weights))))) {
    fprintf(stderr, "tfmc import-hf: -o %s is an input file; refusing to overwrite it\n", out);
    return EXIT_USER;
  }
  struct stat os;
  if (out && !force && stat(out, &os) == 0) {
    fprintf(stderr, "tfmc import-hf: %s exists; refusing to overwrite it (--force to replace it)\n",
            out);
    return EXIT_USER;
  }
  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, stderr);
  int rc = EXIT_USER;
  char err[1024];
  RtSafetensors *st = NULL;
  SrcFile *src = src_file_read(a, config, err, sizeof err);
  if (!src) {
    fprintf(stderr, "tfmc: %s\n", err);
    goto done;
  }
  if (weights) {
    if (rt_st_open(weights, &st, err, sizeof err)) {
      fprintf(stderr, "tfmc: %s\n", err);
      goto done;
    }
    const char **names = arena_alloc(a, sizeof(char *) * (size_t)(rt_st_count(st) + 1));
    for (int i = 0; i < rt_st_count(st); i++)
      names[i] = rt_st_get(st, i)->name;
    io.weights_path = weights;
    io.tensor_names = names;
    io.n_tensor_names = rt_st_count(st);
  }
  const char *text = spec_import_hf(a, src, &io, &d);
  if (!text)
    goto done;
  if (!out) {
    fputs(text, stdout);
    rc = fflush(stdout) ? EXIT_USER : 0;
    goto done;
  }
  FILE *f = fopen(out, "w");
  if (!f) {
    fprintf(stderr, "tfmc: cannot write %s: %s\n", out, strerror(errno));
    goto done;
  }
  bool ok = fputs(text, f) >= 0;
  if (fclose(f) || !ok) {
    fprintf(stderr, "tfmc: cannot write %s\n", out);
    goto done;
  }
  rc = 0;
done:
  if (st)
    rt_st_close(st);
  arena_destroy(a);
  return rc;
}

/* ---- main ---- */

static void usage(FILE *f) {
  fputs("usage: tfmc COMMAND [ARGS]\n\n"
        "commands:\n"
        "  check SPEC          validate a model spec; print parameters, weight bytes, FLOPs\n"
        "  ir SPEC|FILE.tfir   print the graph IR (text or Graphviz dot)\n"
        "  run SPEC ...        run a model on inputs (LLVM JIT, or the interpreter)\n"
        "  attention SPEC ...  draw a run's attention maps (SVG / HTML)\n"
        "  build SPEC ...      compile a standalone executable\n"
        "  emit-c SPEC ...     write a portable C99 project\n"
        "  bench SPEC ...      measure each pass: the pipeline with each pass off in turn\n"
        "  compare OUT REF     compare two safetensors files within a tolerance\n"
        "  import-hf CONFIG    write a spec for a Hugging Face config.json (BERT, GPT-2, ...)\n\n"
        "'tfmc COMMAND --help' describes each command.\n",
        f);
}

static int tfmc_main(int argc, char **argv);

/* Output that never reached its file is a failure: stdout is flushed and
 * closed here, so `tfmc run > /dev/full` exits 1 like an executable. */
int main(int argc, char **argv) {
  int rc = tfmc_main(argc, argv);
  if (fflush(stdout) != 0 || ferror(stdout) || fclose(stdout) != 0) {
    fprintf(stderr, "tfmc: cannot write to standard output: %s\n", strerror(errno));
    if (!rc)
      rc = EXIT_USER;
  }
  if ((fflush(stderr) != 0 || ferror(stderr)) && !rc)
    rc = EXIT_USER;
  return rc;
}

static int tfmc_main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(cmd, "check") == 0)
    return cmd_check(argc - 2, argv + 2);
  if (strcmp(cmd, "ir") == 0)
    return cmd_ir(argc - 2, argv + 2);
  if (strcmp(cmd, "run") == 0)
    return cmd_run(argc - 2, argv + 2);
  if (strcmp(cmd, "attention") == 0)
    return cmd_attention(argc - 2, argv + 2);
  if (strcmp(cmd, "compare") == 0)
    return cmd_compare(argc - 2, argv + 2);
  if (strcmp(cmd, "bench") == 0)
    return cmd_bench(argc - 2, argv + 2);
  if (strcmp(cmd, "build") == 0)
    return cmd_build(argc - 2, argv + 2);
  if (strcmp(cmd, "emit-c") == 0)
    return cmd_emit_c(argc - 2, argv + 2);
  if (strcmp(cmd, "import-hf") == 0)
    return cmd_import_hf(argc - 2, argv + 2);
  fprintf(stderr, "tfmc: unknown command '%s'\n", cmd);
  usage(stderr);
  return EXIT_USAGE;
}
