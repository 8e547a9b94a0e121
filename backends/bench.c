/* backends/bench.c — tfmc bench: each pass of a pipeline off in turn,
 * measured side by side (bench.h says what runs and how it is timed).
 *
 * Invariants: every variant compiles the same spec with the same weights
 * (loaded once) and runs on the same inputs, bound once per variant by
 * backend_bind_tensors; the variants differ only in their pipeline. The
 * counts are static (the loop IR at the bound dims), the times medians of
 * interleaved runs; nothing here decides anything about the model. */
#include "backends/bench.h"

#include "backends/exec.h"
#include "ir/loop.h"
#include "runtime/rt_profile.h"
#include "runtime/rt_sample.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The variants' pipelines: the level's, without each distinct pass, -O0. */
static int variants_make(Arena *a, int level, BenchVariant **out, char *err, size_t errlen) {
  PassPipeline full;
  if (level < 1 || !pass_pipeline_level(level, &full)) {
    snprintf(err, errlen, "unknown level -O%d: bench measures the passes of -O1, -O2 or -O3",
             level);
    return -1;
  }
  BenchVariant *v = arena_alloc(a, (size_t)(full.n + 2) * sizeof *v);
  int n = 0;
  memset(&v[n], 0, sizeof v[n]);
  v[n++].pipeline = full;
  for (int i = 0; i < full.n; i++) {
    bool seen = false;
    for (int k = 0; k < i; k++) seen |= full.passes[k] == full.passes[i];
    if (seen) continue;
    memset(&v[n], 0, sizeof v[n]);
    v[n].without = full.passes[i]->name;
    v[n].pipeline = full;
    char e2[512];
    TFMC_ASSERT(pass_pipeline_disable(&v[n].pipeline, v[n].without, e2, sizeof e2));
    n++;
  }
  memset(&v[n], 0, sizeof v[n]);
  v[n++].pipeline.n = 0; /* -O0 */
  *out = v;
  return n;
}

/* Inputs for info at batch B and every other symbol = seq: ids uniform in
 * their vocabulary (PCG32, fixed seed), masks all set (no padding). */
static int inputs_make(Arena *a, const RtModelInfo *info, int64_t batch, int64_t seq,
                       Tensor **out, char *err, size_t errlen) {
  for (int s = 0; s < info->n_syms; s++) {
    bool is_b = strcmp(info->sym_names[s], "B") == 0;
    int64_t want = is_b ? batch : seq;
    if (want > info->sym_max[s])
      return rt_errorf(err, errlen, "--%s %lld: model '%s' takes at most %lld (%s, %s)",
                       is_b ? "batch" : "seq", (long long)want, info->name,
                       (long long)info->sym_max[s], info->sym_names[s],
                       is_b ? "its max_batch" : "its maximum length");
  }
  Tensor *t = arena_alloc(a, (size_t)(info->n_inputs + 1) * sizeof *t);
  RtRng rng;
  rt_rng_seed(&rng, 1);
  for (int i = 0; i < info->n_inputs; i++) {
    const RtTensorInfo *ti = &info->inputs[i];
    t[i].name = ti->name;
    t[i].rank = ti->rank;
    int64_t n = 1;
    for (int d = 0; d < ti->rank; d++) {
      const RtDim *dim = &ti->dims[d];
      t[i].dims[d] = dim->sym < 0 ? dim->value
                     : strcmp(info->sym_names[dim->sym], "B") == 0 ? batch : seq;
      n *= t[i].dims[d];
    }
    if (ti->kind == RT_INPUT_MASK) {
      t[i].dtype = IR_BOOL;
      t[i].data = arena_alloc(a, (size_t)n + 1);
      memset(t[i].data, 1, (size_t)n);
    } else {
      t[i].dtype = IR_I32;
      int32_t *ids = arena_alloc(a, (size_t)n * 4 + 4);
      for (int64_t k = 0; k < n; k++)
        ids[k] = ti->vocab > 0 ? (int32_t)(rt_rng_u32(&rng) % (uint32_t)ti->vocab) : 0;
      t[i].data = ids;
    }
  }
  *out = t;
  return 0;
}

static void pipeline_str(char *buf, size_t n, const PassPipeline *pl) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < pl->n && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? "," : "", pl->passes[i]->name);
}

int bench_run(Arena *a, Diags *d, const BenchOptions *o, BenchResult *r, char *err,
              size_t errlen) {
  memset(r, 0, sizeof *r);
  if (errlen) *err = 0;
  BenchVariant *v;
  int n = variants_make(a, o->level, &v, err, errlen);
  if (n < 0) return 1;
  if (o->batch < 1 || o->seq < 1 || o->rounds < 1)
    return rt_errorf(err, errlen, "--batch, --seq and --rounds take a count >= 1");
  Compiled *c = arena_alloc(a, (size_t)n * sizeof *c);
  RtBound *b = arena_alloc(a, (size_t)n * sizeof *b);
  ExecSession **s = arena_alloc(a, (size_t)n * sizeof *s);
  memset(b, 0, (size_t)n * sizeof *b);
  memset(s, 0, (size_t)n * sizeof *s);
  double *ms = arena_alloc(a, (size_t)n * (size_t)o->rounds * sizeof *ms);
  Tensor *in = NULL;
  int bound = 0, rc = 1;
  ExecOptions eo = {o->threads, 0, false};
  for (int i = 0; i < n; i++) {
    PassContext pctx = {.diags = d};
    DriverOptions dopt = {.weights = o->weights, .seed = o->seed, .passes = &v[i].pipeline,
                          .pass_ctx = &pctx, .stage = DRIVER_PACKED,
                          .weight_set = i ? c[0].w : NULL,
                          /* a variant whose weights the first variant packed alike
                           * runs on its block: one packed copy, not one per variant */
                          .packed_like = i ? &c[0] : NULL};
    if (o->progress) {
      char pl[512];
      pipeline_str(pl, sizeof pl, &v[i].pipeline);
      fprintf(stderr, "bench: compiling %d/%d: %s%s%s\n", i + 1, n, *pl ? "" : "-O0 (no passes)",
              pl, v[i].without ? arena_printf(a, " (without %s)", v[i].without) : "");
    }
    if (driver_compile_file(a, d, o->spec, &dopt, &c[i], err, errlen)) goto done;
    if (!in && inputs_make(a, c[0].info, o->batch, o->seq, &in, err, errlen)) goto done;
    if (backend_bind_tensors(c[i].info, in, c[i].info->n_inputs, &b[i], err, errlen)) goto done;
    bound = i + 1;
    pass_loop_stats(c[i].prog, b[i].syms, &v[i].stats);
    if (exec_session_create("jit", &c[i], &eo, &s[i], err, errlen)) goto done;
    if (exec_session_run(s[i], &b[i], err, errlen)) goto done; /* warm-up */
  }
  for (int round = 0; round < o->rounds; round++)
    for (int j = 0; j < n; j++) {
      int i = (round + j) % n;
      /* one untimed run first: its pool's workers, asleep since its last
       * turn, wake, and its weights and arena come back into the caches,
       * so the timed run is a steady-state forward as `run --repeat` times
       * it, not the cost of following another variant */
      if (exec_session_run(s[i], &b[i], err, errlen)) goto done;
      double t0 = rt_timing_now_ms();
      if (exec_session_run(s[i], &b[i], err, errlen)) goto done;
      ms[i * o->rounds + round] = rt_timing_now_ms() - t0;
    }
  for (int i = 0; i < n; i++) {
    RtTiming t;
    double *sorted = &ms[i * o->rounds]; /* rt_timing_summarise sorts them */
    rt_timing_summarise(sorted, o->rounds, &t);
    v[i].ms_median = t.median_ms;
    v[i].ms_min = t.min_ms;
    v[i].spread = (sorted[(3 * (o->rounds - 1)) / 4] - sorted[(o->rounds - 1) / 4]) /
                  (2 * t.median_ms);
  }
  r->model = c[0].info->name;
  r->level = o->level;
  r->threads = o->threads;
  r->rounds = o->rounds;
  r->batch = o->batch;
  r->seq = o->seq;
  r->n = n;
  r->v = v;
  rc = 0;
done:
  for (int i = 0; i < n; i++) exec_session_destroy(s[i]);
  for (int i = 0; i < bound; i++) rt_model_unbind(c[i].info, &b[i]);
  return rc;
}

static const char *bytes_str(char *buf, size_t n, int64_t bytes) {
  double v = (double)bytes;
  const char *u = "B";
  if (v >= 1e9 || v <= -1e9) v /= 1e9, u = "GB";
  else if (v >= 1e6 || v <= -1e6) v /= 1e6, u = "MB";
  else if (v >= 1e3 || v <= -1e3) v /= 1e3, u = "kB";
  snprintf(buf, n, *u == 'B' ? "%.0f %s" : "%.2f %s", v, u);
  return buf;
}

static void row(FILE *f, const char *name, const BenchVariant *with, const BenchVariant *without) {
  char b1[32];
  bool exact = with->stats.exact && without->stats.exact;
  fprintf(f, "%-20s %8d %14s%s %10.3f %10.3f %8.3fx\n", name,
          without->stats.kernels - with->stats.kernels,
          bytes_str(b1, sizeof b1, without->stats.bytes_written - with->stats.bytes_written),
          exact ? " " : "?", with->ms_median, without->ms_median,
          without->ms_median / with->ms_median);
}

void bench_print(FILE *f, const BenchResult *r) {
  const BenchVariant *full = &r->v[0], *o0 = &r->v[r->n - 1];
  char pl[512];
  pipeline_str(pl, sizeof pl, &full->pipeline);
  char threads[32], all[32];
  snprintf(threads, sizeof threads, r->threads ? "%d" : "one per CPU", r->threads);
  snprintf(all, sizeof all, "all of -O%d", r->level);
  fprintf(f, "bench: model '%s', -O%d (%s), batch %lld, seq %lld, threads %s, JIT; median of %d "
          "interleaved run%s per variant\n",
          r->model, r->level, pl, (long long)r->batch, (long long)r->seq, threads, r->rounds,
          r->rounds == 1 ? "" : "s");
  fprintf(f, "%-20s %8s %15s %10s %10s %9s\n", "pass", "kernels", "bytes not", "ms with",
          "ms without", "without/");
  fprintf(f, "%-20s %8s %15s %10s %10s %9s\n", "", "removed", "written", "", "", "with");
  for (int i = 1; i < r->n - 1; i++) row(f, r->v[i].without, full, &r->v[i]);
  row(f, all, full, o0);
  int k0 = o0->stats.kernels, kn = full->stats.kernels;
  fprintf(f, "kernels per forward: -O0 %d, -O%d %d (%+.0f%%)\n", k0, r->level, kn,
          k0 ? 100.0 * (kn - k0) / k0 : 0.0);
  bool exact = true;
  int noisiest = 0;
  for (int i = 0; i < r->n; i++) {
    exact &= r->v[i].stats.exact;
    if (r->v[i].spread > r->v[noisiest].spread) noisiest = i;
  }
  const BenchVariant *nv = &r->v[noisiest];
  fprintf(f, "noise: the middle half of a variant's runs spans up to +-%.1f%% of its median (%s%s)%s\n",
          100 * nv->spread, nv->without ? "without " : noisiest ? "-O0" : "the whole pipeline",
          nv->without ? nv->without : "",
          r->rounds < 4 ? "; too few rounds to say" : "");
  if (!exact)
    fprintf(f, "(?: some loop bound or call size was not known statically; those bytes are not "
            "counted)\n");
}

/* ---- JSON ---- */

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

static void json_variant(FILE *f, const BenchVariant *v) {
  fprintf(f, "{\"passes\": [");
  for (int i = 0; i < v->pipeline.n; i++) {
    if (i) fputs(", ", f);
    json_str(f, v->pipeline.passes[i]->name);
  }
  fprintf(f, "], \"kernels\": %d, \"calls\": %lld, \"bytes_written\": %lld, \"exact\": %s, "
          "\"ms_median\": %.6f, \"ms_min\": %.6f, \"spread\": %.6f}",
          v->stats.kernels, (long long)v->stats.calls, (long long)v->stats.bytes_written,
          v->stats.exact ? "true" : "false", v->ms_median, v->ms_min, v->spread);
}

static void json_row(FILE *f, const BenchVariant *with, const BenchVariant *without) {
  fprintf(f, "\"kernels_removed\": %d, \"bytes_not_written\": %lld, \"ms_with\": %.6f, "
          "\"ms_without\": %.6f, \"ratio\": %.6f",
          without->stats.kernels - with->stats.kernels,
          (long long)(without->stats.bytes_written - with->stats.bytes_written), with->ms_median,
          without->ms_median, without->ms_median / with->ms_median);
}

char *bench_json(const BenchResult *r, size_t *len) {
  char *text = NULL;
  FILE *f = open_memstream(&text, len);
  if (!f) return NULL;
  const BenchVariant *full = &r->v[0], *o0 = &r->v[r->n - 1];
  fputs("{\"model\": ", f);
  json_str(f, r->model);
  fprintf(f, ", \"level\": %d, \"batch\": %lld, \"seq\": %lld, \"threads\": %d, "
          "\"rounds\": %d, \"backend\": \"jit\",\n \"pipeline\": ",
          r->level, (long long)r->batch, (long long)r->seq, r->threads, r->rounds);
  json_variant(f, full);
  fputs(",\n \"O0\": ", f);
  json_variant(f, o0);
  fputs(",\n \"passes\": [", f);
  for (int i = 1; i < r->n - 1; i++) {
    fputs(i > 1 ? ",\n  {\"pass\": " : "\n  {\"pass\": ", f);
    json_str(f, r->v[i].without);
    fputs(", ", f);
    json_row(f, full, &r->v[i]);
    fputs(", \"without\": ", f);
    json_variant(f, &r->v[i]);
    fputs("}", f);
  }
  fputs("],\n \"all\": {", f);
  json_row(f, full, o0);
  fprintf(f, "},\n \"kernels_per_forward\": {\"O0\": %d, \"O%d\": %d}}\n", o0->stats.kernels,
          r->level, full->stats.kernels);
  if (fclose(f)) {
    free(text);
    return NULL;
  }
  return text;
}
