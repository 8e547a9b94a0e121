/* runtime/rt_io.h — the model I/O contract shared by the CLI and compiled
 * executables: token ids and padding masks read from a safetensors file and
 * checked before anything runs (README "Inputs and outputs").
 *
 * Depends on libc and rt_safetensors only. Returned buffers are malloc'd;
 * the caller frees them. */
#ifndef TFMC_RT_IO_H
#define TFMC_RT_IO_H

#include "runtime/rt_safetensors.h"

#include <stdint.h>

/* Reads `name` as token ids [B,L] of any integer dtype into int32, checking
 * 1 <= B <= max_b, 1 <= L <= max_len and 0 <= id < vocab. On success *ids is
 * malloc'd (B*L values) and *b, *len are set. Returns 0 or non-zero with a
 * message naming the tensor. */
int rt_io_read_ids(const RtSafetensors *st, const char *file_label,
                   const char *name, int64_t vocab, int64_t max_b,
                   int64_t max_len, int32_t **ids, int64_t *b, int64_t *len,
                   char *err, size_t errlen);

/* Fills out[B*L] (1 = real token, 0 = padding) from, in this order: the
 * tensor mask_name [B,L] (any integer or bool dtype, values 0/1), the tensor
 * lengths_name [B] (1 <= length <= L), ids != pad_id (pad_id >= 0), else all
 * ones. Every row must have at least one real token, and a row's real
 * tokens need not be contiguous only when given as a mask. Returns 0 or
 * non-zero with a message. */
int rt_io_key_mask(const RtSafetensors *st, const char *file_label,
                   const char *mask_name, const char *lengths_name,
                   const int32_t *ids, int64_t b, int64_t len, int64_t pad_id,
                   uint8_t *out, char *err, size_t errlen);

#endif
