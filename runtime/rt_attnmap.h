/* runtime/rt_attnmap.h — attention probabilities as a picture: a grid of
 * heatmaps, one row per attention layer and one column per head, each
 * with its query tokens down the left and its key tokens across the top
 * (cross-attention: target tokens down, source tokens across), coloured by
 * probability through viridis on a fixed [0, 1] scale with a legend bar,
 * under a title naming the model, the layers, the heads and the batch row.
 * Written as SVG (or SVG in a minimal HTML page) by hand: no plotting
 * stack. `tfmc attention` and executables compiled with --attention
 * (their --attention-map) both draw through rt_attnmap_request and
 * rt_attnmap_draw_run / rt_attnmap_draw_generated, so the same model and
 * inputs give the same bytes.
 *
 *     RtAttnRequest r;
 *     char err[512];
 *     // the options as given: --attention-map, --layer, --head, --batch-row
 *     if (rt_attnmap_request("--attention-map", "maps.svg", NULL, "1", NULL, &r, err,
 *                            sizeof err)) ...;
 *     // b: a bound run of info, after it ran, whose outputs include
 *     // "attention" (info->attention_layer) or "attention.LAYER"
 *     if (rt_attnmap_draw_run("exe", info, &b, &vocab, &r, err, sizeof err)) ...;
 *
 * or, one step lower:
 *
 *     RtAttnMaps m;
 *     if (rt_attnmap_collect(info, &b, &vocab, 0, &m, err, sizeof err)) ...;
 *     RtAttnPlot p = {"sort", m.layers, m.n_layers, 0, -1, false};
 *     if (rt_attnmap_write(stdout, &p, err, sizeof err)) ...;
 *     rt_attnmap_free(&m);
 *
 * The SVG is well-formed XML 1.0 in UTF-8: every label is escaped (& < > "
 * '), control characters and invalid UTF-8 become U+FFFD, long labels are
 * cut with an ellipsis. Each heatmap cell is one <rect class="cell">, in
 * the order layer, head, query row, key column, with a <title> tooltip
 * (query token, key token, probability); nothing else is a cell.
 *
 * Depends on libc (POSIX 2008: open_memstream, stat), libm, rt_model,
 * rt_text, rt_file and rt_genrun's RtGenCapture only; C99. */
#ifndef TFMC_RT_ATTNMAP_H
#define TFMC_RT_ATTNMAP_H

#include "runtime/rt_genrun.h"
#include "runtime/rt_model.h"
#include "runtime/rt_text.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* One layer's probabilities for the whole batch. */
typedef struct RtAttnLayer {
  const char *name;             /* "encoder.0", "decoder.1.cross" */
  const float *probs;           /* [batch, heads, tq, tk], row-major */
  int64_t batch, heads, tq, tk;
  const char *const *q_labels;  /* tq labels of batch_row's queries, or NULL: positions */
  const char *const *k_labels;  /* tk labels of its keys, or NULL */
} RtAttnLayer;

typedef struct RtAttnPlot {
  const char *model;         /* the model's name, for the title */
  const RtAttnLayer *layers; /* one grid row each, in this order */
  int n_layers;
  int64_t batch_row;         /* which sequence of the batch */
  int64_t head;              /* one head, or -1: every head (one column each) */
  bool html;                 /* the SVG inside a minimal HTML5 page */
  bool generated;            /* queries are generated tokens, one per step (tfmc
                                attention --generate): the title and key say so */
} RtAttnPlot;

/* Cells a picture may hold: a bigger one would not be viewable (pick a
 * layer or a head). */
#define RT_ATTNMAP_MAX_CELLS ((int64_t)1 << 22)

/* Writes p to f. Refuses (message, nothing written) a batch_row or head out
 * of range, no layers, or more than RT_ATTNMAP_MAX_CELLS cells; a write
 * error is reported too (the caller still closes f). Returns 0 or 1. */
int rt_attnmap_write(FILE *f, const RtAttnPlot *p, char *err, size_t errlen);

/* Viridis (matplotlib's perceptually uniform sequential map) at t in
 * [0, 1] (clamped; NaN gives 0), as 8-bit sRGB: Matt Zucker's degree-6
 * polynomial fit (CC0), within 1/255-ish of the 256-entry table. */
void rt_attnmap_viridis(double t, unsigned char rgb[3]);

/* The layers of a bound run, with labels for batch_row: every output
 * named "attention.LAYER", or the output "attention" named
 * info->attention_layer (skipped when that is NULL). Queries and keys are labelled by the ids
 * input that fed them (encoder layers: "src" or "tokens"; decoder self:
 * "tgt" or "tokens"; decoder.N.cross: "tgt" down, "src" across) as
 * symbols of v when v is non-NULL and has the id, as decimal ids
 * otherwise. m owns the labels (rt_attnmap_free); the probabilities stay
 * b's. Returns 0, or 1 with a message (no attention outputs, batch_row
 * out of range) and nothing allocated. */
typedef struct RtAttnMaps {
  RtAttnLayer *layers;
  int n_layers;
  char **owned;  /* label arrays and decimal strings this holds */
  int n_owned;
} RtAttnMaps;

int rt_attnmap_collect(const RtModelInfo *info, const RtBound *b, const RtVocab *v,
                       int64_t batch_row, RtAttnMaps *m, char *err, size_t errlen);
void rt_attnmap_free(RtAttnMaps *m);

/* One layer of a generation (rt_genrun.h RtGenCapture: probs [1, heads, n,
 * keys], row g the query that chose generated id g): queries labelled by
 * the generated ids q_ids[0..n), keys by k_ids[0..keys) (the source, or the
 * prompt followed by the generated ids), as symbols of v or decimal ids.
 * m owns the labels; probs stay the caller's. Returns 0, or 1 with a
 * message and nothing allocated. */
int rt_attnmap_generated(const char *layer, const float *probs, int64_t heads, int64_t n,
                         int64_t keys, const int32_t *q_ids, const int32_t *k_ids,
                         const RtVocab *v, RtAttnMaps *m, char *err, size_t errlen);

/* ---- a picture as a command line asks for it ---- */

/* What to draw and where: `tfmc attention`'s -o, --layer, --head and
 * --batch-row, an executable's --attention-map and the same three. */
typedef struct RtAttnRequest {
  const char *out;   /* FILE.svg, or FILE.html: the SVG in a minimal page */
  const char *layer; /* one layer ("encoder.0", "decoder.1.cross"), or NULL: every
                        layer there is (--layer all, or none given) */
  int64_t head;      /* one head, or -1: every head (--head all, or none given) */
  int64_t batch_row; /* which sequence of the batch (default 0) */
  bool html;
} RtAttnRequest;

/* Reads the options as given (NULL: absent; out_opt names the picture's
 * option in messages: "-o", "--attention-map"). Returns 0; 2 (bad usage)
 * with a message for no picture path, one not ending in .svg or .html (a
 * .png says how rsvg-convert makes one from the SVG), --head not a
 * non-negative integer or all, --batch-row not a non-negative integer; 1
 * with a message for a picture path that is a directory. Whether the
 * layer, head and row exist is known once the run's outputs are: the draw
 * functions below check. */
int rt_attnmap_request(const char *out_opt, const char *out, const char *layer, const char *head,
                       const char *batch_row, RtAttnRequest *r, char *err, size_t errlen);

/* The layer whose probabilities info's output i holds ("attention.LAYER",
 * or "attention" with info->attention_layer), or NULL. */
const char *rt_attnmap_output_layer(const RtModelInfo *info, int i);

/* Whether info's outputs hold the attention of layer (NULL: of any layer):
 * "attention.LAYER", or "attention" with info->attention_layer. Returns
 * 0, or 1 with a message naming the layers they hold (or saying there
 * are none: compiled without --attention). */
int rt_attnmap_has_layer(const RtModelInfo *info, const char *layer, char *err, size_t errlen);

/* Writes p to path: drawn in memory, then written as every output is
 * (rt_file.h: atomically, through symlinks, in place to a FIFO or
 * device; a directory refused), so a failure leaves no half picture.
 * Returns 0, or 1 with a message. */
int rt_attnmap_save(const char *path, const RtAttnPlot *p, char *err, size_t errlen);

/* Draws what r asks of a bound run of info, after the run: the layers
 * rt_attnmap_collect finds (r->layer: that one, refused as
 * rt_attnmap_has_layer refuses it), r->head, r->batch_row,
 * titled with info->name, saved to r->out (rt_attnmap_save); then says
 * "PROG: wrote OUT (N layers, H heads, batch row R)" on stderr. Returns 0,
 * or 1 with a message (nothing written). */
int rt_attnmap_draw_run(const char *prog, const RtModelInfo *info, const RtBound *b,
                        const RtVocab *v, const RtAttnRequest *r, char *err, size_t errlen);

/* Draws a generation's attention, c as rt_gen_run captured it (c->attention
 * NULL: refused): the rows of layer (the one decoder layer the step
 * program outputs; r->layer, when set, must be it), one heatmap per head
 * or r->head, generated tokens down, labelled by v; saved to r->out, then
 * "PROG: wrote OUT (LAYER, all heads, N generated tokens)" on stderr.
 * Returns 0, or 1 with a message. */
int rt_attnmap_draw_generated(const char *prog, const char *model, const char *layer,
                              const RtGenCapture *c, const RtVocab *v, const RtAttnRequest *r,
                              char *err, size_t errlen);

#endif
