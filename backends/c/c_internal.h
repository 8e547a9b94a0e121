/* backends/c/c_internal.h — private interface between the files of the C
 * backend. One section per .c file.
 *
 *   text.c     putting arbitrary bytes into generated text safely: C
 *              comments, C string literals, numbers; the executable's name
 *   check.c    validation of a loop program (the loop IR verifier) and of
 *              its model description before they are printed
 *   emit.c     loop IR -> model.c (kernels, tfmc_model_run)
 *   info.c     RtModelInfo -> C data (tfmc_model_info)
 *   project.c  the project directory: model.h, api.c, main.c, weights,
 *              runtime copy, Makefile, CMakeLists.txt
 *   static.c   the static mode's memory region, runtime pieces and
 *              refusals (declared in c_backend.h: tfmc.c prints them)
 *
 * Generated text is plain ASCII whatever the names hold: every byte that
 * came from a spec goes through c_put_comment or c_put_string. */
#ifndef TFMC_C_INTERNAL_H
#define TFMC_C_INTERNAL_H

#include "backends/c/c_backend.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ---- text.c ---- */

/* Writes s (NULL: nothing) for use inside a block comment on one line:
 * printable ASCII as is, except that "*" "/" and "/" "*" are split by a
 * space and "??" by a space (no trigraphs); a backslash, control bytes and
 * non-ASCII bytes become \xHH. The text can neither end the comment, nor
 * open a nested one, nor break the line. */
void c_put_comment(FILE *out, const char *s);

/* Writes s as a C string literal with its quotes (NULL: the token NULL).
 * Printable ASCII as is except '"' and '\\' (escaped) and a '?' after a
 * '?' (written \? so no trigraph forms); every other byte as an octal
 * escape of exactly three digits, so a following digit is never absorbed.
 * Reading the literal back gives exactly the bytes of s. */
void c_put_string(FILE *out, const char *s);

/* An int64_t as a C expression of that value: plain decimal when it fits
 * in 32 bits, INT64_C(...) otherwise, parenthesised when negative. */
void c_put_i64(FILE *out, int64_t v);

/* A float (is_f32) or double constant as a C expression that reads back
 * bit-identical: the shortest %.Ng that round-trips, always with a '.' or
 * an exponent, an 'f' suffix for floats; INFINITY, (-INFINITY), NAN from
 * math.h; negative values parenthesised. */
void c_put_float(FILE *out, double v, bool is_f32);

/* The executable's file name for a model name: [A-Za-z0-9_] only (other
 * bytes become '_'), at most 64 characters, "model" when nothing is left,
 * and "_model" appended to names that would clash with the project's own
 * files or with make / CMake targets ("all", "clean", "runtime", ...). */
void c_exe_name(const char *model_name, char *out, size_t outlen);

/* snprintf into err (NULL / 0 allowed). Returns 1. */
int c_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- check.c ---- */

/* loop_program_verify (ir/loop.h: the rules the printer relies on), its
 * message prefixed "c: ". Returns 0, or non-zero with a message naming the
 * kernel. (The compile driver will own the verifier call; c_emit_model and
 * c_emit_project call this until it does.) */
int c_program_check(const LoopProgram *p, char *err, size_t errlen);

/* Checks the model description against the program: counts within the
 * ABI limits, names present, enum values known, weights inside
 * weights_floats, a kernel table that is empty or has one named row per
 * kernel of the program. Returns 0 or non-zero with a message. */
int c_info_check(const RtModelInfo *info, const LoopProgram *p, char *err, size_t errlen);

/* ---- emit.c ---- */

/* The C name of kernel i: its own name when that is of the form
 * k<digits>[_<letters, digits, _>] and no earlier kernel took it, else
 * tfmc_kernel_<i>. Writes into buf (at least 80 bytes). */
const char *c_kernel_name(const LoopProgram *p, int i, char *buf, size_t buflen);

#endif
