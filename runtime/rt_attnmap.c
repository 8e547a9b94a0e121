/* runtime/rt_attnmap.c — attention maps as SVG (see rt_attnmap.h).
 *
 * The picture, top to bottom: a title and a one-line key; then one row of
 * panels per layer, one panel per head; a panel is its title ("LAYER ·
 * head H"), the key tokens written upwards above the heatmap, the query
 * tokens right-aligned left of it, and Tq x Tk square cells. The legend
 * bar (viridis, 0 at the bottom, 1 at the top, ticks every 0.25) stands
 * right of the grid, level with the first row's heatmaps.
 *
 * Invariants: the output is well-formed XML whatever the labels hold
 * (everything from outside goes through put_text); coordinates are
 * integer pixels, so adjacent cells meet without seams; every heatmap cell
 * is exactly one <rect class="cell"> and nothing else has that class; the
 * writer checks every index it reads against the dims it is given, and
 * refuses before writing anything; a picture reaches its file whole or
 * not at all (rt_attnmap_save). Libc (POSIX 2008) and libm only, C99
 * (emitted C projects copy this file: their executables draw too). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* open_memstream, stat */
#endif
#include "runtime/rt_attnmap.h"
#include "runtime/rt_file.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- colour ---- */

void rt_attnmap_viridis(double t, unsigned char rgb[3]) {
  /* c0 + t (c1 + t (c2 + ... + t c6)) per channel */
  static const double c[7][3] = {
      {0.2777273272234177, 0.005407344544966578, 0.3340998053353061},
      {0.1050930431085774, 1.404613529898575, 1.384590162594685},
      {-0.3308618287255563, 0.214847559468213, 0.09509516302823659},
      {-4.634230498983486, -5.799100973351585, -19.33244095627987},
      {6.228269936347081, 14.17993336680509, 56.69055260068105},
      {4.776384997670288, -13.74514537774601, -65.35303263337234},
      {-5.435455855934631, 4.645852612178535, 26.3124352495832},
  };
  if (!(t >= 0)) t = 0; /* NaN too */
  if (t > 1) t = 1;
  for (int ch = 0; ch < 3; ch++) {
    double v = c[6][ch];
    for (int k = 5; k >= 0; k--) v = c[k][ch] + t * v;
    v = v < 0 ? 0 : v > 1 ? 1 : v;
    rgb[ch] = (unsigned char)lround(v * 255);
  }
}

/* ---- text: escaped, valid UTF-8, cut to a width ---- */

#define LABEL_MAX_CHARS 12 /* code points a token label shows (the last an ellipsis) */

/* Length in bytes of the valid UTF-8 sequence at s (1..4) holding a
 * character XML 1.0 allows, or 0. */
static int utf8_char(const unsigned char *s) {
  unsigned c = s[0];
  if (c < 0x80) return c >= 0x20 || c == '\t' ? 1 : 0;
  int n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  for (int k = 1; k < n; k++)
    if ((s[k] & 0xC0) != 0x80) return 0;
  if (n == 3) {
    if (c == 0xE0 && s[1] < 0xA0) return 0;            /* overlong */
    if (c == 0xED && s[1] >= 0xA0) return 0;           /* surrogates */
    if (c == 0xEF && s[1] == 0xBF && s[2] >= 0xBE) return 0; /* U+FFFE, U+FFFF */
  }
  if (n == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90))) return 0;
  return n;
}

/* Code points put_text(s, max) writes. */
static int text_chars(const char *s, int max) {
  int n = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p && n < max; n++) {
    int k = utf8_char(p);
    p += k ? k : 1;
  }
  return n;
}

/* Writes s as XML character data (also safe inside attribute values):
 * markup characters as entities, anything not a valid XML character as
 * U+FFFD; more than max code points are cut to max - 1 and an ellipsis. */
static void put_text(FILE *f, const char *s, int max) {
  const unsigned char *p = (const unsigned char *)s;
  int total = 0;
  for (const unsigned char *q = p; *q; total++) {
    int k = utf8_char(q);
    q += k ? k : 1;
  }
  int keep = total > max ? max - 1 : total;
  for (int n = 0; n < keep; n++) {
    int k = utf8_char(p);
    if (!k) {
      fputs("\xEF\xBF\xBD", f);
      p++;
      continue;
    }
    switch (*p) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    case '\'': fputs("&apos;", f); break;
    default: fwrite(p, 1, (size_t)k, f);
    }
    p += k;
  }
  if (keep < total) fputs("\xE2\x80\xA6", f);
}

/* The label of position i: labels[i], or i itself (buf holds it). */
static const char *label_of(const char *const *labels, int64_t i, char *buf, size_t n) {
  if (labels && labels[i]) return labels[i];
  snprintf(buf, n, "%lld", (long long)i);
  return buf;
}

/* ---- layout ---- */

enum {
  MARGIN = 16,
  HEADER_H = 58,  /* title (16 px) and key line (11 px) */
  PANEL_TITLE_H = 18,
  GAP = 24,       /* between panels */
  LEGEND_W = 16,
  LEGEND_TEXT_W = 48,
};

typedef struct Layout {
  int cell;               /* cell side, px */
  int font;               /* token labels, px */
  int64_t label_w;        /* room left of a heatmap for query labels */
  int64_t label_h;        /* room above it for key labels */
  int64_t col_pitch;      /* panel to panel, across */
  int64_t n_cols;
  int64_t grid_x, grid_y; /* top-left of the first panel */
  int64_t width, height;
  int64_t legend_x, legend_y, legend_h;
} Layout;

/* Estimated width of n characters of a sans-serif font of size px. */
static int64_t text_w(int n, int px) { return (int64_t)ceil(n * px * 0.62); }

static int64_t panel_h(const Layout *L, const RtAttnLayer *l) {
  return PANEL_TITLE_H + L->label_h + l->tq * L->cell;
}

static int max_label_chars(const char *const *labels, int64_t n) {
  int m = 1;
  char buf[32];
  for (int64_t i = 0; i < n; i++) {
    int k = text_chars(label_of(labels, i, buf, sizeof buf), LABEL_MAX_CHARS);
    if (k > m) m = k;
  }
  return m;
}

/* key_chars: the key line's length (11 px) */
static void layout(const RtAttnPlot *p, int title_chars, int key_chars, Layout *L) {
  int64_t longest = 1, tk_max = 1;
  int q_chars = 1, k_chars = 1;
  for (int i = 0; i < p->n_layers; i++) {
    const RtAttnLayer *l = &p->layers[i];
    if (l->tq > longest) longest = l->tq;
    if (l->tk > longest) longest = l->tk;
    if (l->tk > tk_max) tk_max = l->tk;
    int q = max_label_chars(l->q_labels, l->tq), k = max_label_chars(l->k_labels, l->tk);
    if (q > q_chars) q_chars = q;
    if (k > k_chars) k_chars = k;
  }
  /* a heatmap about 320 px across, cells 6..28 px */
  int64_t cell = 320 / longest;
  L->cell = cell < 6 ? 6 : cell > 28 ? 28 : (int)cell;
  L->font = L->cell - 3 < 5 ? 5 : L->cell - 3 > 12 ? 12 : L->cell - 3;
  L->label_w = text_w(q_chars, L->font) + 6;
  L->label_h = text_w(k_chars, L->font) + 6;
  L->n_cols = p->head >= 0 ? 1 : p->layers[0].heads;
  int64_t heat_w = tk_max * L->cell;
  int64_t title_w = text_w(24, 11); /* "decoder.11.cross · head 11" */
  L->col_pitch = L->label_w + (heat_w > title_w ? heat_w : title_w) + GAP;
  L->grid_x = MARGIN;
  L->grid_y = HEADER_H;
  L->legend_x = L->grid_x + L->n_cols * L->col_pitch;
  L->legend_y = L->grid_y + PANEL_TITLE_H + L->label_h;
  int64_t first = p->layers[0].tq * L->cell;
  L->legend_h = first < 120 ? 120 : first > 320 ? 320 : first;
  L->width = L->legend_x + LEGEND_W + LEGEND_TEXT_W + MARGIN;
  int64_t need = MARGIN + text_w(title_chars, 16) + MARGIN;
  if (L->width < need) L->width = need;
  need = MARGIN + text_w(key_chars, 11) + MARGIN;
  if (L->width < need) L->width = need;
  int64_t y = L->grid_y;
  for (int i = 0; i < p->n_layers; i++) y += panel_h(L, &p->layers[i]) + GAP;
  int64_t legend_bottom = L->legend_y + L->legend_h + 30;
  L->height = (y > legend_bottom ? y : legend_bottom) - GAP + MARGIN;
}

/* ---- the picture ---- */

static void put_title(FILE *f, const RtAttnPlot *p) {
  fputs("attention probabilities of ", f);
  put_text(f, p->model ? p->model : "model", 64);
  fputs(": ", f);
  if (p->n_layers == 1) put_text(f, p->layers[0].name, 64);
  else fprintf(f, "%d layers", p->n_layers);
  if (p->head >= 0) fprintf(f, ", head %lld", (long long)p->head);
  else fprintf(f, ", %lld heads", (long long)p->layers[0].heads);
  if (p->generated) fprintf(f, ", %lld generated tokens", (long long)p->layers[0].tq);
  else fprintf(f, ", batch row %lld", (long long)p->batch_row);
}

static int title_chars(const RtAttnPlot *p) {
  int n = 64 + text_chars(p->model ? p->model : "model", 64);
  if (p->n_layers == 1) n += text_chars(p->layers[0].name, 64);
  return n;
}

static void put_legend(FILE *f, const Layout *L) {
  fputs("<defs><linearGradient id=\"viridis\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">", f);
  for (int k = 0; k <= 16; k++) {
    unsigned char c[3];
    rt_attnmap_viridis(k / 16.0, c);
    fprintf(f, "<stop offset=\"%g\" stop-color=\"#%02x%02x%02x\"/>", k / 16.0, c[0], c[1], c[2]);
  }
  fputs("</linearGradient></defs>\n", f);
  int64_t x = L->legend_x, y = L->legend_y, h = L->legend_h;
  fprintf(f, "<text x=\"%lld\" y=\"%lld\" font-size=\"11\">probability</text>\n", (long long)x,
          (long long)(y - 10));
  fprintf(f,
          "<rect class=\"legend\" x=\"%lld\" y=\"%lld\" width=\"%d\" height=\"%lld\" "
          "fill=\"url(#viridis)\" stroke=\"#444\" stroke-width=\"1\"/>\n",
          (long long)x, (long long)y, LEGEND_W, (long long)h);
  for (int k = 0; k <= 4; k++) {
    double v = k / 4.0, ty = (double)y + (double)h * (1 - v);
    fprintf(f,
            "<line x1=\"%lld\" y1=\"%.1f\" x2=\"%lld\" y2=\"%.1f\" stroke=\"#444\"/>"
            "<text x=\"%lld\" y=\"%.1f\" font-size=\"11\">%g</text>\n",
            (long long)(x + LEGEND_W), ty, (long long)(x + LEGEND_W + 4), ty,
            (long long)(x + LEGEND_W + 7), ty + 4, v);
  }
}

/* One heatmap with its labels; (x, y) its panel's top-left corner. */
static void put_panel(FILE *f, const Layout *L, const RtAttnLayer *l, int64_t row, int64_t h,
                      int64_t x, int64_t y) {
  char qb[32], kb[32];
  int c = L->cell;
  fprintf(f, "<g class=\"panel\">\n<text x=\"%lld\" y=\"%lld\" font-size=\"11\" "
             "font-weight=\"bold\">",
          (long long)(x + L->label_w), (long long)(y + 12));
  put_text(f, l->name, 64);
  fprintf(f, " \xC2\xB7 head %lld</text>\n", (long long)h);
  int64_t hx = x + L->label_w, hy = y + PANEL_TITLE_H + L->label_h; /* heatmap corner */
  double base = L->font * 0.35; /* baseline below a line's middle */
  for (int64_t j = 0; j < l->tk; j++) {
    fprintf(f, "<text font-size=\"%d\" transform=\"translate(%.1f %lld) rotate(-90)\">", L->font,
            (double)(hx + j * c) + c / 2.0 + base, (long long)(hy - 3));
    put_text(f, label_of(l->k_labels, j, kb, sizeof kb), LABEL_MAX_CHARS);
    fputs("</text>\n", f);
  }
  for (int64_t i = 0; i < l->tq; i++) {
    fprintf(f, "<text font-size=\"%d\" x=\"%lld\" y=\"%.1f\" text-anchor=\"end\">", L->font,
            (long long)(hx - 3), (double)(hy + i * c) + c / 2.0 + base);
    put_text(f, label_of(l->q_labels, i, qb, sizeof qb), LABEL_MAX_CHARS);
    fputs("</text>\n", f);
  }
  const float *m = l->probs + ((row * l->heads + h) * l->tq) * l->tk;
  for (int64_t i = 0; i < l->tq; i++)
    for (int64_t j = 0; j < l->tk; j++) {
      float v = m[i * l->tk + j];
      unsigned char rgb[3];
      rt_attnmap_viridis(v, rgb);
      fprintf(f,
              "<rect class=\"cell\" x=\"%lld\" y=\"%lld\" width=\"%d\" height=\"%d\" "
              "fill=\"#%02x%02x%02x\"><title>",
              (long long)(hx + j * c), (long long)(hy + i * c), c, c, rgb[0], rgb[1], rgb[2]);
      put_text(f, label_of(l->q_labels, i, qb, sizeof qb), LABEL_MAX_CHARS);
      fputs(" \xE2\x86\x92 ", f);
      put_text(f, label_of(l->k_labels, j, kb, sizeof kb), LABEL_MAX_CHARS);
      fprintf(f, ": %.4f</title></rect>\n", v);
    }
  fprintf(f,
          "<rect class=\"frame\" x=\"%lld\" y=\"%lld\" width=\"%lld\" height=\"%lld\" "
          "fill=\"none\" stroke=\"#444\" stroke-width=\"1\"/>\n</g>\n",
          (long long)hx, (long long)hy, (long long)(l->tk * c), (long long)(l->tq * c));
}

int rt_attnmap_write(FILE *f, const RtAttnPlot *p, char *err, size_t errlen) {
  if (p->n_layers < 1 || !p->layers) return rt_errorf(err, errlen, "no attention layers to draw");
  int64_t heads = p->layers[0].heads, cells = 0;
  bool cross = false;
  for (int i = 0; i < p->n_layers; i++) {
    const RtAttnLayer *l = &p->layers[i];
    if (!l->probs || l->batch < 1 || l->heads < 1 || l->tq < 1 || l->tk < 1)
      return rt_errorf(err, errlen, "attention layer %s is empty", l->name);
    if (l->heads != heads)
      return rt_errorf(err, errlen, "attention layers have different numbers of heads");
    if (p->batch_row < 0 || p->batch_row >= l->batch)
      return rt_errorf(err, errlen, "batch row %lld out of range: the batch has %lld sequence%s",
                       (long long)p->batch_row, (long long)l->batch, l->batch == 1 ? "" : "s");
    if (p->head >= heads)
      return rt_errorf(err, errlen, "head %lld out of range: the model has %lld heads (0..%lld)",
                       (long long)p->head, (long long)heads, (long long)heads - 1);
    size_t n = strlen(l->name);
    cross |= n >= 6 && strcmp(l->name + n - 6, ".cross") == 0;
    cells += (p->head >= 0 ? 1 : heads) * l->tq * l->tk;
  }
  if (cells > RT_ATTNMAP_MAX_CELLS)
    return rt_errorf(err, errlen,
                     "%lld cells are too many for one picture (at most %lld): pick one layer or "
                     "one head",
                     (long long)cells, (long long)RT_ATTNMAP_MAX_CELLS);
  static const char *const cross_key =
      " (cross-attention: target tokens down, source tokens across)";
  static const char *const key_a = "each map: queries down, keys across";
  static const char *const key_gen =
      "each map: generated tokens down (a row: the step that chose the token), keys across";
  static const char *const cross_key_gen = " (the source tokens)";
  static const char *const key_b = "; colour: probability (viridis, 0 to 1)";
  Layout L;
  const char *key = p->generated ? key_gen : key_a;
  const char *ckey = cross ? p->generated ? cross_key_gen : cross_key : "";
  layout(p, title_chars(p), (int)(strlen(key) + strlen(ckey) + strlen(key_b)), &L);
  if (p->html) {
    fputs("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n<title>", f);
    put_title(f, p);
    fputs("</title>\n</head>\n<body>\n", f);
  } else {
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
  }
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%lldpx\" height=\"%lldpx\" "
          "viewBox=\"0 0 %lld %lld\">\n",
          (long long)L.width, (long long)L.height, (long long)L.width, (long long)L.height);
  fputs("<title>", f);
  put_title(f, p);
  fputs("</title>\n", f);
  fprintf(f, "<rect class=\"background\" width=\"%lld\" height=\"%lld\" fill=\"white\"/>\n",
          (long long)L.width, (long long)L.height);
  fputs("<g font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" fill=\"#222\">\n", f);
  fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"16\" font-weight=\"bold\">", MARGIN, MARGIN + 12);
  put_title(f, p);
  fprintf(f, "</text>\n<text x=\"%d\" y=\"%d\" font-size=\"11\">", MARGIN, MARGIN + 32);
  fputs(key, f);
  fputs(ckey, f);
  fputs(key_b, f);
  fputs("</text>\n", f);
  put_legend(f, &L);
  int64_t y = L.grid_y;
  for (int i = 0; i < p->n_layers; i++) {
    const RtAttnLayer *l = &p->layers[i];
    for (int64_t k = 0; k < L.n_cols; k++)
      put_panel(f, &L, l, p->batch_row, p->head >= 0 ? p->head : k, L.grid_x + k * L.col_pitch, y);
    y += panel_h(&L, l) + GAP;
  }
  fputs("</g>\n</svg>\n", f);
  if (p->html) fputs("</body>\n</html>\n", f);
  if (ferror(f)) return rt_errorf(err, errlen, "write error");
  return 0;
}

/* ---- the layers of a bound run ---- */

void rt_attnmap_free(RtAttnMaps *m) {
  for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
  free(m->owned);
  free(m->layers);
  memset(m, 0, sizeof *m);
}

static bool has_prefix(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The ids input named a (or else b): its index, or -1. */
static int ids_input(const RtModelInfo *info, const char *a, const char *b) {
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < info->n_inputs && i < RT_MAX_IO; i++) {
      const RtTensorInfo *t = &info->inputs[i];
      if (t->kind == RT_INPUT_IDS && t->rank == 2 && strcmp(t->name, pass ? b : a) == 0) return i;
    }
  return -1;
}

/* Labels of ids[0..n): symbols of v or decimal ids, held by m (two more
 * of its owned entries). Returns 0 or 1 (out of memory). */
static int labels_of_ids(const int32_t *ids, int64_t n, const RtVocab *v, RtAttnMaps *m,
                         const char *const **out) {
  const char **lab = malloc((size_t)n * sizeof *lab);
  char *digits = malloc((size_t)n * 12);
  if (!lab || !digits) {
    free(lab);
    free(digits);
    return 1;
  }
  m->owned[m->n_owned++] = (char *)lab;
  m->owned[m->n_owned++] = digits;
  for (int64_t i = 0; i < n; i++) {
    const char *s = rt_text_vocab_symbol(v, ids[i]);
    if (!s) {
      snprintf(digits + i * 12, 12, "%ld", (long)ids[i]);
      s = digits + i * 12;
    }
    lab[i] = s;
  }
  *out = lab;
  return 0;
}

/* Labels of batch row `row` of ids input `in` when it has len positions:
 * symbols of v or decimal ids; NULL (positions) when the input does not
 * fit. Returns 0 or 1 (out of memory). */
static int labels_for(const RtModelInfo *info, const RtBound *b, const RtVocab *v, int in,
                      int64_t row, int64_t len, RtAttnMaps *m, const char *const **out) {
  *out = NULL;
  if (in < 0) return 0;
  const RtTensorInfo *t = &info->inputs[in];
  int64_t rows = rt_model_dim(&t->dims[0], b->syms), n = rt_model_dim(&t->dims[1], b->syms);
  if (n != len || row >= rows || !b->inputs[in]) return 0;
  return labels_of_ids((const int32_t *)b->inputs[in] + row * n, n, v, m, out);
}

const char *rt_attnmap_output_layer(const RtModelInfo *info, int i) {
  const char *name = info->outputs[i].name;
  if (!name || info->outputs[i].rank < 3) return NULL;
  if (strcmp(name, "attention") == 0) return info->attention_layer;
  return has_prefix(name, "attention.") ? name + strlen("attention.") : NULL;
}

int rt_attnmap_generated(const char *layer, const float *probs, int64_t heads, int64_t n,
                         int64_t keys, const int32_t *q_ids, const int32_t *k_ids,
                         const RtVocab *v, RtAttnMaps *m, char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
  if (!probs || heads < 1 || n < 1 || keys < 1)
    return rt_errorf(err, errlen, "the generation drew no attention (%s)", layer);
  m->layers = calloc(1, sizeof *m->layers);
  m->owned = calloc(4, sizeof *m->owned);
  if (!m->layers || !m->owned) {
    rt_attnmap_free(m);
    return rt_errorf(err, errlen, "out of memory");
  }
  RtAttnLayer *l = &m->layers[m->n_layers++];
  *l = (RtAttnLayer){layer, probs, 1, heads, n, keys, NULL, NULL};
  if (labels_of_ids(q_ids, n, v, m, &l->q_labels) || labels_of_ids(k_ids, keys, v, m, &l->k_labels)) {
    rt_attnmap_free(m);
    return rt_errorf(err, errlen, "out of memory");
  }
  return 0;
}

int rt_attnmap_collect(const RtModelInfo *info, const RtBound *b, const RtVocab *v,
                       int64_t batch_row, RtAttnMaps *m, char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
  int n_out = info->n_outputs < 0 ? 0 : info->n_outputs > RT_MAX_IO ? RT_MAX_IO : info->n_outputs;
  m->layers = calloc((size_t)n_out + 1, sizeof *m->layers);
  m->owned = calloc(4 * (size_t)n_out + 1, sizeof *m->owned);
  if (!m->layers || !m->owned) {
    rt_attnmap_free(m);
    return rt_errorf(err, errlen, "out of memory");
  }
  for (int i = 0; i < n_out; i++) {
    const char *name = rt_attnmap_output_layer(info, i);
    if (!name || info->outputs[i].rank != 4 || !b->outputs[i]) continue;
    RtAttnLayer *l = &m->layers[m->n_layers++];
    l->name = name;
    l->probs = b->outputs[i];
    l->batch = b->output_dims[i][0];
    l->heads = b->output_dims[i][1];
    l->tq = b->output_dims[i][2];
    l->tk = b->output_dims[i][3];
    if (batch_row < 0 || batch_row >= l->batch) {
      int64_t nb = l->batch;
      rt_attnmap_free(m);
      return rt_errorf(err, errlen, "batch row %lld out of range: the batch has %lld sequence%s",
                       (long long)batch_row, (long long)nb, nb == 1 ? "" : "s");
    }
    size_t n = strlen(name);
    bool cross = n >= 6 && strcmp(name + n - 6, ".cross") == 0;
    int q, k;
    if (has_prefix(name, "encoder.")) q = k = ids_input(info, "src", "tokens");
    else if (cross) q = ids_input(info, "tgt", "tgt"), k = ids_input(info, "src", "src");
    else q = k = ids_input(info, "tgt", "tokens");
    if (labels_for(info, b, v, q, batch_row, l->tq, m, &l->q_labels) ||
        labels_for(info, b, v, k, batch_row, l->tk, m, &l->k_labels)) {
      rt_attnmap_free(m);
      return rt_errorf(err, errlen, "out of memory");
    }
  }
  if (m->n_layers == 0) {
    rt_attnmap_free(m);
    return rt_errorf(err, errlen, "the model has no attention outputs");
  }
  return 0;
}

/* ---- a picture as a command line asks for it ---- */

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* A non-negative integer: 0, or 1 when s is not one. */
static int count_of(const char *s, int64_t *v) {
  char *e;
  errno = 0;
  long long x = strtoll(s, &e, 10);
  if (*e || errno || !*s || x < 0 || *s == '+' || *s == ' ') return 1;
  *v = x;
  return 0;
}

int rt_attnmap_request(const char *out_opt, const char *out, const char *layer, const char *head,
                       const char *batch_row, RtAttnRequest *r, char *err, size_t errlen) {
  memset(r, 0, sizeof *r);
  r->head = -1;
  if (!out || !*out) {
    rt_errorf(err, errlen, "give the picture's path with %s FILE.svg", out_opt);
    return 2;
  }
  if (ends_with(out, ".png") || ends_with(out, ".PNG")) {
    rt_errorf(err, errlen,
              "%s %s: the picture is FILE.svg or FILE.html; for a PNG draw the SVG, then "
              "'rsvg-convert FILE.svg -o %s'",
              out_opt, out, out);
    return 2;
  }
  if (!ends_with(out, ".svg") && !ends_with(out, ".html")) {
    rt_errorf(err, errlen, "%s %s: the picture is FILE.svg or FILE.html", out_opt, out);
    return 2;
  }
  if (head && strcmp(head, "all") != 0 && count_of(head, &r->head)) {
    rt_errorf(err, errlen, "--head takes a non-negative integer or all, not '%s'", head);
    return 2;
  }
  if (batch_row && count_of(batch_row, &r->batch_row)) {
    rt_errorf(err, errlen, "--batch-row takes a non-negative integer, not '%s'", batch_row);
    return 2;
  }
  struct stat st;
  if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
    return rt_errorf(err, errlen, "%s %s is a directory; give the picture's file name", out_opt,
                     out);
  r->out = out;
  r->layer = layer && strcmp(layer, "all") != 0 ? layer : NULL;
  r->html = ends_with(out, ".html");
  return 0;
}

int rt_attnmap_save(const char *path, const RtAttnPlot *p, char *err, size_t errlen) {
  char *svg = NULL;
  size_t svg_len = 0;
  FILE *f = open_memstream(&svg, &svg_len);
  if (!f) return rt_errorf(err, errlen, "out of memory");
  int rc = rt_attnmap_write(f, p, err, errlen);
  if (fclose(f) && !rc) rc = rt_errorf(err, errlen, "out of memory");
  RtOut o = {0};
  if (!rc && !(rc = rt_out_open(&o, path, 0, err, errlen))) {
    if (rt_file_write_all(o.fd, svg, svg_len)) {
      rc = rt_errorf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
      rt_out_abort(&o);
    } else {
      rc = rt_out_commit(&o, err, errlen);
    }
  }
  free(svg);
  return rc ? 1 : 0;
}

int rt_attnmap_has_layer(const RtModelInfo *info, const char *layer, char *err, size_t errlen) {
  int n_out = info->n_outputs < 0 ? 0 : info->n_outputs > RT_MAX_IO ? RT_MAX_IO : info->n_outputs;
  int n = 0;
  for (int i = 0; i < n_out; i++) {
    const char *l = rt_attnmap_output_layer(info, i);
    if (l && (!layer || strcmp(l, layer) == 0)) return 0;
    n += l != NULL;
  }
  const char *model = info->name ? info->name : "?";
  if (!n)
    return rt_errorf(err, errlen,
                     "model '%s' was compiled without attention outputs (--attention "
                     "LAYER|all)", model);
  size_t k = (size_t)snprintf(err, errlen,
                              "--layer %s: not among the attention layers compiled in (model "
                              "'%s' outputs those of ",
                              layer, model);
  for (int i = 0, j = 0; i < n_out && k < errlen; i++) {
    const char *l = rt_attnmap_output_layer(info, i);
    if (l) k += (size_t)snprintf(err + k, errlen - k, "%s%s", j++ ? ", " : "", l);
  }
  if (k < errlen) snprintf(err + k, errlen - k, "; --attention LAYER|all chooses them)");
  return 1;
}

int rt_attnmap_draw_run(const char *prog, const RtModelInfo *info, const RtBound *b,
                        const RtVocab *v, const RtAttnRequest *r, char *err, size_t errlen) {
  if (rt_attnmap_has_layer(info, r->layer, err, errlen)) return 1;
  RtAttnMaps m;
  if (rt_attnmap_collect(info, b, v, r->batch_row, &m, err, errlen)) return 1;
  int pick = -1;
  for (int i = 0; r->layer && i < m.n_layers && pick < 0; i++)
    if (strcmp(m.layers[i].name, r->layer) == 0) pick = i;
  RtAttnPlot p = {info->name,   pick >= 0 ? &m.layers[pick] : m.layers,
                  pick >= 0 ? 1 : m.n_layers, r->batch_row, r->head, r->html, false};
  int rc = rt_attnmap_save(r->out, &p, err, errlen);
  if (!rc) {
    char heads[32] = "all";
    if (r->head >= 0) snprintf(heads, sizeof heads, "%lld", (long long)r->head);
    fprintf(stderr, "%s: wrote %s (%d layer%s, %s heads, batch row %lld)\n", prog, r->out,
            p.n_layers, p.n_layers == 1 ? "" : "s", heads, (long long)r->batch_row);
  }
  rt_attnmap_free(&m);
  return rc;
}

int rt_attnmap_draw_generated(const char *prog, const char *model, const char *layer,
                              const RtGenCapture *c, const RtVocab *v, const RtAttnRequest *r,
                              char *err, size_t errlen) {
  if (!layer || !c->attention)
    return rt_errorf(err, errlen, "the generation drew no attention (the step program outputs "
                                  "none)");
  if (r->layer && strcmp(r->layer, layer) != 0)
    return rt_errorf(err, errlen,
                     "--layer %s: not the attention layer compiled in (model '%s' generates "
                     "with that of %s; --attention decoder.N[.cross] chooses it)",
                     r->layer, model ? model : "?", layer);
  RtAttnMaps m;
  if (rt_attnmap_generated(layer, c->attention, c->heads, c->n, c->keys, c->ids, c->key_ids, v,
                           &m, err, errlen))
    return 1;
  RtAttnPlot p = {model, m.layers, 1, 0, r->head, r->html, true};
  int rc = rt_attnmap_save(r->out, &p, err, errlen);
  if (!rc) {
    char heads[32] = "all heads";
    if (r->head >= 0) snprintf(heads, sizeof heads, "head %lld", (long long)r->head);
    fprintf(stderr, "%s: wrote %s (%s, %s, %lld generated tokens)\n", prog, r->out, layer, heads,
            (long long)c->n);
  }
  rt_attnmap_free(&m);
  return rc;
}
