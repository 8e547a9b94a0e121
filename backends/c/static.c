/* backends/c/static.c — what `tfmc emit-c --static` decides about a model
 * before project.c writes it: the one memory region (c_static_memory), the
 * runtime pieces the program calls (c_static_runtime), and what the static
 * runtime cannot run (c_static_check).
 *
 * The static project links only runtime/rt_static.c (the single-threaded
 * pool and kernel runner) and the files of the runtime functions some
 * kernel calls (ir/callees.def rows: a switch with no default, so a new
 * callee cannot be forgotten here). Its memory is the region laid out by
 * runtime/templates/api_static.c: a 64-byte header, the arena, the state
 * and the derived masks, each rounded up to 64 bytes, plus 64 bytes so the
 * region may start at any address; the masks part counts each mask input's
 * elements at the maximum dims rounded up to 8, as api_static.c does.
 *
 * A generating model (decoder, encoder_decoder) adds a second region for
 * its step API (runtime/templates/api_gen_static.c): a header holding the
 * TfmcGen (an RtGenModel and its RtStepper: sized here from this host's
 * struct, the widest a target has, and checked by the template), one
 * arena for the encoder and the step (they never run at once: the larger
 * of the two), the step's state (the KV cache at batch 1 and max_len
 * positions) and the stepper's buffers (rt_stepper_bytes), each rounded
 * up to 64 bytes, plus 64 bytes of alignment slack. The runtime then also
 * links rt_stepper.c and rt_gen_model.c, built with TFMC_STATIC. */
#include "backends/c/c_internal.h"
#include "runtime/rt_gen_model.h"

#include <stdio.h>
#include <string.h>

#define STATIC_ALIGN 64
#define STATIC_HEADER 64

static int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

void c_static_memory(const RtModelInfo *info, CStaticMemory *m) {
  memset(m, 0, sizeof *m);
  m->arena = info->arena_bytes > 0 ? info->arena_bytes : 0;
  m->state = info->state_bytes > 0 ? info->state_bytes : 0;
  for (int i = 0; i < info->n_inputs; i++) {
    const RtTensorInfo *t = &info->inputs[i];
    if (t->kind != RT_INPUT_MASK) continue;
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++)
      n *= t->dims[d].sym >= 0 ? info->sym_max[t->dims[d].sym] : t->dims[d].value;
    m->masks += round_up(n, 8);
  }
  m->header = STATIC_HEADER;
  m->total = STATIC_ALIGN + STATIC_HEADER + round_up(m->arena, STATIC_ALIGN) +
             round_up(m->state, STATIC_ALIGN) + round_up(m->masks, STATIC_ALIGN);
}

int c_static_gen_memory(const RtModelInfo *step, const RtModelInfo *encode, CStaticGenMemory *m) {
  memset(m, 0, sizeof *m);
  int64_t stepper = rt_stepper_bytes(step, encode);
  if (stepper < 0) return 1;
  /* struct TfmcGen: a magic, the position, the RtGenModel */
  m->header = round_up((int64_t)sizeof(RtGenModel) + 64, STATIC_ALIGN);
  m->arena = step->arena_bytes;
  if (encode && encode->arena_bytes > m->arena) m->arena = encode->arena_bytes;
  m->state = step->state_bytes;
  m->stepper = stepper;
  m->total = STATIC_ALIGN + m->header + round_up(m->arena, STATIC_ALIGN) +
             round_up(m->state, STATIC_ALIGN) + round_up(m->stepper, STATIC_ALIGN);
  return 0;
}

static void scan_stmts(LStmt *const *stmts, int n, bool *used, bool *probs) {
  for (int i = 0; i < n; i++) {
    const LStmt *s = stmts[i];
    if (s->kind == LS_CALL) {
      used[s->callee] = true;
      const LCalleeInfo *ci = &loop_callee_info[s->callee];
      for (int a = 0; a < s->n_args && a < ci->n_args; a++)
        if (s->callee == LC_ATTENTION && ci->args[a].kind == LA_F32_OUT_OR_NULL &&
            s->args[a]->kind != LX_NULL)
          *probs = true;
    }
    if (s->kind == LS_FOR || s->kind == LS_BLOCK) scan_stmts(s->stmts, s->n_stmts, used, probs);
  }
}

int c_static_check(const LoopProgram *p, bool used[LC_CALLEE_COUNT], char *err, size_t errlen) {
  bool probs = false;
  memset(used, 0, LC_CALLEE_COUNT * sizeof *used);
  for (int k = 0; k < p->n_kernels; k++)
    scan_stmts(p->kernels[k].body->stmts, p->kernels[k].body->n_stmts, used, &probs);
  /* the static runtime's attention is the streaming loop, which writes no
   * probabilities */
  if (probs)
    return c_fail(err, errlen,
                  "c: --static does not write attention maps (--attention): the static "
                  "runtime's attention keeps no probabilities");
  return 0;
}

int c_static_check_all(const LoopProgram *const *progs, int n_progs, bool used[LC_CALLEE_COUNT],
                       char *err, size_t errlen) {
  memset(used, 0, LC_CALLEE_COUNT * sizeof *used);
  for (int i = 0; i < n_progs; i++) {
    bool one[LC_CALLEE_COUNT];
    if (!progs[i]) continue;
    if (c_static_check(progs[i], one, err, errlen)) return 1;
    for (int c = 0; c < LC_CALLEE_COUNT; c++) used[c] |= one[c];
  }
  return 0;
}

int c_static_runtime(const bool used[LC_CALLEE_COUNT], bool gen, const char **files, int cap) {
  const char *list[24];
  int n = 0;
  list[n++] = "rt_model.h";
  list[n++] = "rt_pool.h";
  list[n++] = "rt_static.c";
  if (gen) { /* the step API's loop: RtStepper over RtGenModel's ops */
    list[n++] = "rt_arena.h";
    list[n++] = "rt_gen_model.c";
    list[n++] = "rt_gen_model.h";
    list[n++] = "rt_stepper.c";
    list[n++] = "rt_stepper.h";
    list[n++] = "rt_weights.h";
  }
  bool gemm = false, exp = false, act = false;
  for (int c = 0; c < LC_CALLEE_COUNT; c++) {
    if (!used[c]) continue;
    switch ((LCallee)c) {
    case LC_LINEAR:
    case LC_LINEAR_PACKED:
    case LC_LINEAR_PACKED_BF16:
    case LC_LINEAR_PACKED_I8: gemm = true; break;
    case LC_ATTENTION:
    case LC_ATTENTION_FLASH:
      if (used[LC_ATTENTION] && used[LC_ATTENTION_FLASH] && c == LC_ATTENTION_FLASH)
        break; /* listed once */
      list[n++] = "rt_attention.c";
      list[n++] = "rt_attention.h";
      gemm = exp = true; /* its BLAS-path products are rt_sgemm's */
      break;
    case LC_GELU: act = true; break;
    case LC_CALLEE_COUNT: break;
    }
  }
  if (gemm) {
    list[n++] = "rt_gemm.c";
    list[n++] = "rt_gemm_i8.c"; /* the portable int8 kernel, in the baseline set */
    list[n++] = "rt_gemm.h";
    list[n++] = "rt_gemm_kernels.h";
    act = true; /* rt_linear's epilogue applies rt_act_row */
  }
  if (act) {
    list[n++] = "rt_act.c";
    list[n++] = "rt_act.h";
    exp = true;
  }
  if (exp) list[n++] = "rt_exp.h";
  if (n > cap) return -1;
  /* sorted, as the project lists files */
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && strcmp(list[j - 1], list[j]) > 0; j--) {
      const char *t = list[j];
      list[j] = list[j - 1];
      list[j - 1] = t;
    }
  memcpy(files, list, (size_t)n * sizeof *files);
  return n;
}

int c_static_sources(const LoopProgram *p, const LoopProgram *step, const LoopProgram *encode,
                     bool embed, char (*files)[64], int cap) {
  bool used[LC_CALLEE_COUNT];
  const char *rt[32];
  char err[256];
  const LoopProgram *progs[3] = {p, step, encode};
  int nrt = c_static_check_all(progs, 3, used, err, sizeof err)
                ? 0
                : c_static_runtime(used, step != NULL, rt, 32);
  int n = 0;
  if (cap < 7 + (nrt > 0 ? nrt : 0)) return -1;
  snprintf(files[n++], 64, "model.c");
  snprintf(files[n++], 64, "api.c");
  if (step) {
    snprintf(files[n++], 64, "step.c");
    if (encode) snprintf(files[n++], 64, "encode.c");
    snprintf(files[n++], 64, "gen_info.c");
    snprintf(files[n++], 64, "gen_api.c");
  }
  for (int i = 0; i < nrt; i++) {
    size_t len = strlen(rt[i]);
    if (len > 2 && strcmp(rt[i] + len - 2, ".c") == 0) snprintf(files[n++], 64, "runtime/%s", rt[i]);
  }
  if (embed) snprintf(files[n++], 64, "weights.c");
  return n;
}
