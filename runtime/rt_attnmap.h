/* runtime/rt_attnmap.h — attention probabilities as a picture: a grid of
 * heatmaps, one row per attention layer and one column per head, each
 * with its query tokens down the left and its key tokens across the top
 * (cross-attention: target tokens down, source tokens across), coloured by
 * probability through viridis on a fixed [0, 1] scale with a legend bar,
 * under a title naming the model, the layers, the heads and the batch row.
 * Written as SVG (or SVG in a minimal HTML page) by hand: no plotting
 * stack. `tfmc attention` uses it on the outputs of a run compiled with
 * --attention LAYER|all.
 *
 *     RtAttnMaps m;
 *     char err[512];
 *     // b: a bound run of info whose outputs include "attention" (one
 *     // layer: name it) or "attention.LAYER" (lowered with "all")
 *     if (rt_attnmap_collect(info, &b, &vocab, 0, "encoder.0", &m, err, sizeof err))
 *       ...;
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
 * Depends on libc, libm, rt_model and rt_text only; C99. */
#ifndef TFMC_RT_ATTNMAP_H
#define TFMC_RT_ATTNMAP_H

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
 * named "attention.LAYER", or the output "attention" named single_layer
 * (which must then be given). Queries and keys are labelled by the ids
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
                       int64_t batch_row, const char *single_layer, RtAttnMaps *m, char *err,
                       size_t errlen);
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

#endif
