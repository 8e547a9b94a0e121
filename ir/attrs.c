/* ir/attrs.c — the attribute table (attrs.def) as data, and typed access to
 * an IrAttrs field by attribute id.
 *
 * Invariants: ir_attr_info has one row per attrs.def row, in its order; a
 * row's offset is its IrAttrs field's and its kind matches the field's C
 * type (the struct in ir.h is generated from the same row, so they cannot
 * drift). Every ops.def row carries only bits this table defines, and every
 * attribute is carried by at least one op (static_asserts below), so a row
 * nobody uses or a bit nobody defines fails the build.
 */
#include "ir.h"

#include <string.h>

/* the IR_ATTR_* bits are enum constants, so int-sized: bit 31 is out */
_Static_assert(IR_ATTR_ID_COUNT <= 31, "IR_ATTR_* masks are int constants: at most 31 attributes");

const IrAttrInfo ir_attr_info[IR_ATTR_ID_COUNT] = {
#define IR_ATTR(E, field, kind, check)                                                             \
  [IR_ATTR_ID_##E] = {#field, IR_ATTR_##E, IR_ATTR_KIND_##kind, IR_ATTR_CHECK_##check,             \
                      offsetof(IrAttrs, field)},
#include "attrs.def"
#undef IR_ATTR
};

/* Every bit the table defines, and every bit some op carries. */
enum {
  IR_ATTRS_DEFINED = 0
#define IR_ATTR(E, field, kind, check) | IR_ATTR_##E
#include "attrs.def"
#undef IR_ATTR
  ,
  IR_ATTRS_CARRIED = 0
#define IR_OP(e, name, mn, mx, attrs, kind) | (attrs)
#include "ops.def"
#undef IR_OP
};
_Static_assert((IR_ATTRS_CARRIED & ~IR_ATTRS_DEFINED) == 0,
               "an ops.def row carries an attribute bit attrs.def does not define");
_Static_assert(IR_ATTRS_CARRIED == IR_ATTRS_DEFINED,
               "an attrs.def row that no ops.def row carries");

int ir_attr_lookup(const char *name, size_t len) {
  for (int i = 0; i < IR_ATTR_ID_COUNT; i++)
    if (strlen(ir_attr_info[i].name) == len && memcmp(ir_attr_info[i].name, name, len) == 0)
      return i;
  return -1;
}

static const void *field(const IrAttrs *at, IrAttrId id, IrAttrKind kind) {
  TFMC_ASSERT((int)id >= 0 && id < IR_ATTR_ID_COUNT && ir_attr_info[id].kind == kind);
  return (const char *)at + ir_attr_info[id].offset;
}

static void *field_mut(IrAttrs *at, IrAttrId id, IrAttrKind kind) {
  TFMC_ASSERT((int)id >= 0 && id < IR_ATTR_ID_COUNT && ir_attr_info[id].kind == kind);
  return (char *)at + ir_attr_info[id].offset;
}

const char *ir_attrs_get_string(const IrAttrs *at, IrAttrId id) {
  return *(const char *const *)field(at, id, IR_ATTR_KIND_STRING);
}

double ir_attrs_get_f64(const IrAttrs *at, IrAttrId id) {
  return *(const double *)field(at, id, IR_ATTR_KIND_F64);
}

bool ir_attrs_get_bool(const IrAttrs *at, IrAttrId id) {
  return *(const bool *)field(at, id, IR_ATTR_KIND_BOOL);
}

int64_t ir_attrs_get_int(const IrAttrs *at, IrAttrId id) {
  TFMC_ASSERT((int)id >= 0 && id < IR_ATTR_ID_COUNT);
  if (ir_attr_info[id].kind == IR_ATTR_KIND_INT)
    return *(const int *)field(at, id, IR_ATTR_KIND_INT);
  if (ir_attr_info[id].kind == IR_ATTR_KIND_ACT)
    return *(const IrAct *)field(at, id, IR_ATTR_KIND_ACT);
  return *(const int64_t *)field(at, id, IR_ATTR_KIND_I64);
}

void ir_attrs_set_string(IrAttrs *at, IrAttrId id, const char *v) {
  *(const char **)field_mut(at, id, IR_ATTR_KIND_STRING) = v;
}

void ir_attrs_set_f64(IrAttrs *at, IrAttrId id, double v) {
  *(double *)field_mut(at, id, IR_ATTR_KIND_F64) = v;
}

void ir_attrs_set_bool(IrAttrs *at, IrAttrId id, bool v) {
  *(bool *)field_mut(at, id, IR_ATTR_KIND_BOOL) = v;
}

void ir_attrs_set_int(IrAttrs *at, IrAttrId id, int64_t v) {
  TFMC_ASSERT((int)id >= 0 && id < IR_ATTR_ID_COUNT);
  if (ir_attr_info[id].kind == IR_ATTR_KIND_INT)
    *(int *)field_mut(at, id, IR_ATTR_KIND_INT) = (int)v;
  else if (ir_attr_info[id].kind == IR_ATTR_KIND_ACT)
    *(IrAct *)field_mut(at, id, IR_ATTR_KIND_ACT) = (IrAct)v;
  else
    *(int64_t *)field_mut(at, id, IR_ATTR_KIND_I64) = v;
}

bool ir_attrs_is_zero(const IrAttrs *at, IrAttrId id) {
  switch (ir_attr_info[id].kind) {
  case IR_ATTR_KIND_STRING: return ir_attrs_get_string(at, id) == NULL;
  case IR_ATTR_KIND_F64: return ir_attrs_get_f64(at, id) == 0;
  case IR_ATTR_KIND_BOOL: return !ir_attrs_get_bool(at, id);
  case IR_ATTR_KIND_INT:
  case IR_ATTR_KIND_I64:
  case IR_ATTR_KIND_ACT: return ir_attrs_get_int(at, id) == 0;
  case IR_ATTR_KIND_COUNT: break;
  }
  TFMC_ASSERT(!"attribute without a kind");
  return false;
}

static const char *const act_names[IR_ACT_COUNT] = {"none", "relu", "gelu", "gelu_tanh"};

const char *ir_act_name(int act) {
  return act >= 0 && act < IR_ACT_COUNT ? act_names[act] : "?";
}

int ir_act_lookup(const char *name, size_t len) {
  for (int i = 0; i < IR_ACT_COUNT; i++)
    if (strlen(act_names[i]) == len && memcmp(act_names[i], name, len) == 0)
      return i;
  return -1;
}
