/* tests/runtime/test_attnmap.c — runtime/rt_attnmap: viridis against
 * matplotlib's table at known points; the SVG of a small hand-made layer
 * (cells in layer/head/row/column order, each the colour of its value,
 * labels escaped, positions when there are no labels); refusals before
 * anything is written. */
#include "runtime/rt_attnmap.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Renders p into a malloc'd string; returns rt_attnmap_write's status. */
static int render(const RtAttnPlot *p, char **out, char *err, size_t errlen) {
  size_t n = 0;
  FILE *f = open_memstream(out, &n);
  cr_assert(f);
  int rc = rt_attnmap_write(f, p, err, errlen);
  fclose(f);
  return rc;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

Test(attnmap, viridis_matches_matplotlib) {
  /* matplotlib's viridis table: entries 0, 64, 128, 192, 255 */
  static const struct {
    double t;
    unsigned char rgb[3];
  } ref[] = {{0.0, {0x44, 0x01, 0x54}},
             {64 / 255.0, {0x3b, 0x52, 0x8b}},
             {128 / 255.0, {0x21, 0x91, 0x8c}},
             {192 / 255.0, {0x5e, 0xc9, 0x62}},
             {1.0, {0xfd, 0xe7, 0x25}}};
  for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++) {
    unsigned char c[3];
    rt_attnmap_viridis(ref[i].t, c);
    for (int ch = 0; ch < 3; ch++)
      cr_expect(abs((int)c[ch] - (int)ref[i].rgb[ch]) <= 5, "t=%g channel %d: %02x vs %02x",
                ref[i].t, ch, c[ch], ref[i].rgb[ch]);
  }
  unsigned char lo[3], nan_c[3], hi[3], over[3];
  rt_attnmap_viridis(0, lo);
  rt_attnmap_viridis(NAN, nan_c);
  rt_attnmap_viridis(1, hi);
  rt_attnmap_viridis(7, over);
  cr_assert(memcmp(lo, nan_c, 3) == 0 && memcmp(hi, over, 3) == 0);
  /* sequential: lightness (here: the green channel) never falls */
  int prev = -1;
  for (int k = 0; k <= 255; k++) {
    unsigned char c[3];
    rt_attnmap_viridis(k / 255.0, c);
    cr_assert_geq((int)c[1], prev, "at %d", k);
    prev = c[1];
  }
}

Test(attnmap, cells_in_order_with_their_colours_and_escaped_labels) {
  /* batch 2, heads 2, tq 2, tk 3: value = index / 24 */
  float probs[24];
  for (int i = 0; i < 24; i++) probs[i] = (float)i / 24;
  const char *q[] = {"<s>", "a&b"};
  const char *k[] = {"x\"y", "\x01", "it's"};
  RtAttnLayer l = {"decoder.0.cross", probs, 2, 2, 2, 3, q, k};
  RtAttnPlot p = {"m<1>", &l, 1, 1, -1, false};
  char *svg = NULL, err[256];
  cr_assert_eq(render(&p, &svg, err, sizeof err), 0, "%s", err);
  cr_assert(strncmp(svg, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 44) == 0);
  cr_assert_eq(count(svg, "<rect class=\"cell\""), 2 * 2 * 3);
  /* batch row 1: values 12..23, in head, row, column order */
  const char *c = svg;
  for (int i = 0; i < 12; i++) {
    c = strstr(c, "<rect class=\"cell\"") + 1;
    unsigned char want[3];
    unsigned got[3];
    rt_attnmap_viridis(probs[12 + i], want);
    cr_assert_eq(sscanf(strstr(c, "fill=\"#"), "fill=\"#%2x%2x%2x\"", &got[0], &got[1], &got[2]), 3);
    for (int ch = 0; ch < 3; ch++) cr_assert_eq(got[ch], want[ch], "cell %d", i);
  }
  cr_assert(strstr(svg, "attention probabilities of m&lt;1&gt;: decoder.0.cross, 2 heads, batch row 1"));
  cr_assert(strstr(svg, ">&lt;s&gt;</text>") && strstr(svg, ">a&amp;b</text>"));
  cr_assert(strstr(svg, ">x&quot;y</text>") && strstr(svg, ">it&apos;s</text>"));
  cr_assert(strstr(svg, ">\xEF\xBF\xBD</text>"));
  cr_assert(strstr(svg, "target tokens down, source tokens across"));
  cr_assert(strstr(svg, "<title>a&amp;b \xE2\x86\x92 it&apos;s: 0.9583</title>"));
  free(svg);

  /* one head, no labels: positions */
  RtAttnLayer nl = {"encoder.3", probs, 2, 2, 2, 3, NULL, NULL};
  RtAttnPlot one = {"m", &nl, 1, 0, 1, true};
  cr_assert_eq(render(&one, &svg, err, sizeof err), 0, "%s", err);
  cr_assert(strncmp(svg, "<!DOCTYPE html>", 15) == 0);
  cr_assert_eq(count(svg, "<rect class=\"cell\""), 6);
  cr_assert(strstr(svg, "encoder.3 \xC2\xB7 head 1"));
  cr_assert(strstr(svg, ">2</text>"));
  cr_assert_null(strstr(svg, "cross-attention"));
  free(svg);
}

Test(attnmap, refusals_write_nothing) {
  float probs[8] = {0};
  RtAttnLayer l = {"encoder.0", probs, 1, 2, 2, 2, NULL, NULL};
  char *svg = NULL, err[256];
  RtAttnPlot p = {"m", &l, 1, 1, -1, false};
  cr_assert_eq(render(&p, &svg, err, sizeof err), 1);
  cr_assert(strstr(err, "batch row 1 out of range"), "%s", err);
  cr_assert_eq(strlen(svg), 0);
  free(svg);
  p = (RtAttnPlot){"m", &l, 1, 0, 2, false};
  cr_assert_eq(render(&p, &svg, err, sizeof err), 1);
  cr_assert(strstr(err, "head 2 out of range"), "%s", err);
  free(svg);
  p = (RtAttnPlot){"m", &l, 0, 0, -1, false};
  cr_assert_eq(render(&p, &svg, err, sizeof err), 1);
  free(svg);
  RtAttnLayer big = {"encoder.0", probs, 1, 16, 1024, 1024, NULL, NULL};
  p = (RtAttnPlot){"m", &big, 1, 0, -1, false};
  cr_assert_eq(render(&p, &svg, err, sizeof err), 1);
  cr_assert(strstr(err, "too many"), "%s", err);
  cr_assert_eq(strlen(svg), 0);
  free(svg);
}
