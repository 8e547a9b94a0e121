/* runtime/rt_weights.h — packed weights: one file (or one embedded blob)
 * holding every parameter of a compiled model as f32, in the order, at the
 * offsets and in the layouts of RtModelInfo.weights.
 *
 * Format (all integers little-endian):
 *   0   8  magic "TFMCWTS\0"
 *   8   4  format version (3; version 2, the same but for its checksum,
 *            is still read; version 1, written before a weight that
 *            pack-weights packs and something else gathers was stored once,
 *            in panels, listed a tied embedding twice: refused, saying to
 *            pack the weights again)
 *   12  4  reserved (0; ignored when read)
 *   16  8  layout_hash (RtModelInfo.layout_hash: names, shapes, offsets)
 *   24  8  n_floats
 *   32  8  checksum of the data bytes (see below)
 *   40 24  reserved (0; ignored when read)
 *   64     data: n_floats little-endian f32
 * Checksum: built on one step over 8-byte little-endian words w, FNV-1a 64
 * with an xor-shift fold,
 *     step(h, w) = h' ^ (h' >> 32)  where  h' = (h ^ w) * 0x100000001b3 (mod 2^64)
 * and O = 0xcbf29ce484222325. The data bytes (zero-padded to a whole word
 * when n_floats is odd) are cut into segments of 2^20 bytes, the last one
 * shorter; in a segment, word i goes to lane i % 8:
 *     l[j] = O ^ j (j = 0..7);  for each word i: l[i % 8] = step(l[i % 8], w_i)
 *     digest = O;  for j = 0..7: digest = step(digest, l[j])
 * and the checksum is
 *     h = O;  for each segment in order: h = step(h, digest);  h = step(h, n_floats)
 * Eight independent chains run side by side in a core (one chain waits on
 * each multiply) and the segments on every core: bert-base's 438 MB file
 * opens and verifies in 55-58 ms instead of version 2's 182-188 ms (AMD
 * EPYC Zen 3, 2 vCPUs, page cache warm).
 * step is a bijection in h for a fixed w and in w for a fixed h, and every
 * later step is a bijection in the state, so any change confined to one word
 * is always detected; the fold lets high bits reach low bits (without it,
 * flipping bit 63 of two words of one lane would cancel). Version 2's
 * checksum was one chain: h = O; for each word: h = step(h, w).
 * A file is refused with a clear message when it is truncated, has the wrong
 * magic or version, was packed for another model (layout hash or size), or
 * its checksum does not match. Files are mapped read-only; on a big-endian
 * host the data is copied and byte-swapped. */
#ifndef TFMC_RT_WEIGHTS_H
#define TFMC_RT_WEIGHTS_H

#include "runtime/rt_model.h"

#include <stddef.h>

typedef struct RtWeights RtWeights;

/* Writes data (n_floats, host order) as a packed-weights file for `info`,
 * atomically (temporary file + rename, through symlinks: rt_file.h; only
 * to a regular file). Returns 0 or non-zero + message. */
int rt_weights_write(const char *path, const RtModelInfo *info, const float *data,
                     char *err, size_t errlen);
/* The same bytes to an open descriptor (label names it in messages): for
 * callers that commit several outputs together (rt_out_*). */
int rt_weights_write_fd(int fd, const char *label, const RtModelInfo *info, const float *data,
                        char *err, size_t errlen);
/* Maps and validates a packed-weights file against info. */
int rt_weights_open(const char *path, const RtModelInfo *info, RtWeights **out,
                    char *err, size_t errlen);
/* Validates an in-memory image (embedded weights; the bytes stay owned by
 * the caller and must outlive the RtWeights). */
int rt_weights_from_memory(const void *image, size_t len, const RtModelInfo *info,
                           RtWeights **out, char *err, size_t errlen);
const float *rt_weights_data(const RtWeights *w); /* 64-byte aligned */
void rt_weights_close(RtWeights *w);

/* Asks the kernel to back the 2 MiB-aligned pages inside [p, p + len) of
 * a model's weights with huge pages (Linux transparent huge pages, which
 * default to madvise mode): every run streams the weights once from DRAM,
 * and the TLB then covers 2 MiB per entry instead of 4 KiB. Call it before
 * the memory is first written (anonymous memory) or on a read-only file
 * mapping. Best effort: a no-op where there is no MADV_HUGEPAGE or the
 * range is under 2 MiB; TFMC_HUGE_PAGES=0 turns it off (for measuring). */
void rt_weights_advise_huge(void *p, size_t len);

#endif
