/* tests/ir/test_attrs.c — the attribute table (ir/attrs.def): its rows are
 * well formed (unique identifier names, bit = 1 << id, a CHECK that fits the
 * KIND), the typed accessors reach exactly the row's IrAttrs field, and the
 * pinned all_ops golden exercises every attribute, so the print/parse round
 * trip and the Graphviz test see each row. (Build-time checks in
 * ir/attrs.c: every ops.def bit is defined, every row is carried by an op.) */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static bool check_fits_kind(IrAttrCheck c, IrAttrKind k) {
  switch (c) {
  case IR_ATTR_CHECK_NONE: return true;
  case IR_ATTR_CHECK_NONEMPTY: return k == IR_ATTR_KIND_STRING;
  case IR_ATTR_CHECK_FINITE:
  case IR_ATTR_CHECK_NONNEG: return k == IR_ATTR_KIND_F64;
  case IR_ATTR_CHECK_POSITIVE: return k == IR_ATTR_KIND_INT || k == IR_ATTR_KIND_I64;
  case IR_ATTR_CHECK_OPTIONAL: return k != IR_ATTR_KIND_STRING; /* strings print unnamed */
  case IR_ATTR_CHECK_COUNT: break;
  }
  return false;
}

Test(attrs, rows_well_formed) {
  for (int i = 0; i < IR_ATTR_ID_COUNT; i++) {
    const IrAttrInfo *r = &ir_attr_info[i];
    cr_assert(r->name && r->name[0], "row %d has no name", i);
    for (const char *p = r->name; *p; p++)
      cr_assert((*p >= 'a' && *p <= 'z') || *p == '_' || (p > r->name && *p >= '0' && *p <= '9'),
                "attribute name '%s' is not a lower-case identifier", r->name);
    cr_assert_eq(ir_attr_lookup(r->name, strlen(r->name)), i, "'%s' is not unique", r->name);
    cr_assert_eq(r->bit, 1u << i, "'%s'", r->name);
    cr_assert((int)r->kind >= 0 && r->kind < IR_ATTR_KIND_COUNT, "'%s'", r->name);
    cr_assert(check_fits_kind(r->check, r->kind), "'%s': its CHECK does not fit its KIND", r->name);
    cr_assert(r->offset < sizeof(IrAttrs), "'%s'", r->name);
  }
  cr_assert_eq(ir_attr_lookup("nosuch", 6), -1);
  cr_assert_eq(ir_attr_lookup("eps", 2), -1);
}

/* Sets row i to a non-zero value through the typed setter, reads it back,
 * and checks that nothing outside the row's field changed. */
Test(attrs, accessors_reach_only_their_field) {
  for (int i = 0; i < IR_ATTR_ID_COUNT; i++) {
    IrAttrId id = (IrAttrId)i;
    IrAttrs zero, at;
    memset(&zero, 0, sizeof zero);
    memset(&at, 0, sizeof at);
    size_t size = 0;
    switch (ir_attr_info[i].kind) {
    case IR_ATTR_KIND_STRING:
      ir_attrs_set_string(&at, id, "x");
      cr_assert_str_eq(ir_attrs_get_string(&at, id), "x");
      size = sizeof(const char *);
      break;
    case IR_ATTR_KIND_F64:
      ir_attrs_set_f64(&at, id, 0.375);
      cr_assert_eq(ir_attrs_get_f64(&at, id), 0.375);
      size = sizeof(double);
      break;
    case IR_ATTR_KIND_BOOL:
      ir_attrs_set_bool(&at, id, true);
      cr_assert(ir_attrs_get_bool(&at, id));
      size = sizeof(bool);
      break;
    case IR_ATTR_KIND_INT:
      ir_attrs_set_int(&at, id, -7);
      cr_assert_eq(ir_attrs_get_int(&at, id), -7);
      size = sizeof(int);
      break;
    case IR_ATTR_KIND_I64:
      ir_attrs_set_int(&at, id, INT64_MIN + 3);
      cr_assert_eq(ir_attrs_get_int(&at, id), INT64_MIN + 3);
      size = sizeof(int64_t);
      break;
    case IR_ATTR_KIND_ACT:
      ir_attrs_set_int(&at, id, IR_ACT_GELU_TANH);
      cr_assert_eq(ir_attrs_get_int(&at, id), IR_ACT_GELU_TANH);
      size = sizeof(IrAct);
      break;
    case IR_ATTR_KIND_COUNT: cr_assert_fail("row %d has no kind", i);
    }
    /* clear the field's bytes: the rest must be as it was */
    memset((char *)&at + ir_attr_info[i].offset, 0, size);
    cr_assert(memcmp(&at, &zero, sizeof at) == 0, "'%s' wrote outside its field",
              ir_attr_info[i].name);
  }
}

/* The named fields passes use are the rows' fields. */
Test(attrs, fields_by_name) {
  IrAttrs at;
  memset(&at, 0, sizeof at);
  at.name = "n";
  at.eps = 1e-5;
  at.unbiased = true;
  at.index = 5;
  at.heads = 4;
  at.scale = 0.25;
  cr_assert_str_eq(ir_attrs_get_string(&at, IR_ATTR_ID_NAME), "n");
  cr_assert_eq(ir_attrs_get_f64(&at, IR_ATTR_ID_EPS), 1e-5);
  cr_assert(ir_attrs_get_bool(&at, IR_ATTR_ID_UNBIASED));
  cr_assert_eq(ir_attrs_get_int(&at, IR_ATTR_ID_INDEX), 5);
  cr_assert_eq(ir_attrs_get_int(&at, IR_ATTR_ID_HEADS), 4);
  cr_assert_eq(ir_attrs_get_f64(&at, IR_ATTR_ID_SCALE), 0.25);
  cr_assert_eq(ir_attrs_get_f64(&at, IR_ATTR_ID_VALUE), 0);
}

/* A new attribute must appear in tests/ir/all_ops.tfir (built by
 * test_roundtrip.c's build_all_ops), so the pinned round trip and the
 * Graphviz test print and parse it. */
Test(attrs, all_ops_golden_uses_every_attribute) {
  Arena *a = arena_create();
  Diags d;
  diags_init(&d, a, NULL);
  char err[256];
  SrcFile *src = src_file_read(a, TFMC_SOURCE_DIR "/tests/ir/all_ops.tfir", err, sizeof err);
  cr_assert(src, "%s", err);
  IrGraph *g = ir_graph_parse(a, src, &d);
  cr_assert(g, "%s", d.captured ? d.captured : "");
  unsigned used = 0;
  for (int i = 0; i < g->n_nodes; i++)
    used |= ir_op_info[g->nodes[i].op].attrs;
  for (int i = 0; i < IR_ATTR_ID_COUNT; i++) {
    const IrAttrInfo *r = &ir_attr_info[i];
    cr_assert(used & r->bit, "no node in all_ops.tfir carries attribute '%s'", r->name);
    if (r->kind == IR_ATTR_KIND_STRING)
      continue;
    char *want = arena_printf(a, "%s=", r->name);
    cr_assert(strstr(src->text, want), "all_ops.tfir never prints '%s'", want);
  }
  arena_destroy(a);
}
