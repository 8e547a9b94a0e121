/* runtime/rt_safetensors.h — reading and writing safetensors files.
 *
 * Part of the runtime: depends on libc only (compiled code links it to read
 * its inputs and write its outputs). The compiler uses it for checkpoints.
 *
 * Format: 8-byte little-endian header length N, N bytes of UTF-8 JSON
 *   {"NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]},
 *    ..., "__metadata__": {"key": "value", ...}}
 * then the byte buffer; offsets are relative to the buffer start.
 *
 * Validation on open (each failure is an error with a message naming the file
 * and, where there is one, the tensor):
 *   - file shorter than 8 bytes; header length past the end of the file or
 *     absurd (> 100 MiB);
 *   - header not valid UTF-8, not valid JSON, not an object of objects;
 *   - an entry missing dtype / shape / data_offsets, or with extra keys of
 *     the wrong type; unknown dtype; negative or non-integer dims; rank > 8;
 *     element count overflowing;
 *   - data_offsets not two integers BEGIN <= END, END past the buffer,
 *     END - BEGIN != element count * dtype size;
 *   - two tensors' byte ranges overlapping; duplicate names.
 *   (Trailing bytes not covered by any tensor are allowed, as the reference
 *   implementation allows padding.)
 *
 * Example:
 *     RtSafetensors *st; char err[512];
 *     if (rt_st_open("w.safetensors", &st, err, sizeof err)) { puts(err); return 1; }
 *     const RtStTensor *t = rt_st_find(st, "encoder.norm.weight");
 *     float *buf = malloc(rt_st_numel(t) * 4);
 *     rt_st_read_f32(t, buf, err, sizeof err);   // converts F16/BF16/F32
 *     rt_st_close(st);
 */
#ifndef TFMC_RT_SAFETENSORS_H
#define TFMC_RT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define RT_ST_MAX_RANK 8

typedef enum RtDtype {
  RT_F32, RT_F16, RT_BF16, RT_F64,
  RT_I64, RT_I32, RT_I16, RT_I8,
  RT_U8, RT_BOOL,
  RT_DTYPE_COUNT
} RtDtype;

const char *rt_dtype_name(RtDtype dt); /* "F32", ... as in the file */
size_t rt_dtype_size(RtDtype dt);

typedef struct RtStTensor {
  const char *name; /* owned by the RtSafetensors */
  RtDtype dtype;
  int rank;
  int64_t shape[RT_ST_MAX_RANK];
  const void *data; /* points into the mapped file; little-endian; may be unaligned */
  size_t nbytes;
} RtStTensor;

typedef struct RtSafetensors RtSafetensors;

/* Maps the file read-only and validates it. Returns 0 on success; otherwise
 * non-zero with a message "PATH: ..." in err. The caller owns *out and must
 * rt_st_close it. */
int rt_st_open(const char *path, RtSafetensors **out, char *err, size_t errlen);
/* Same validation over a buffer the caller keeps alive (fuzzing, tests);
 * `label` names it in messages. The buffer is not copied. */
int rt_st_parse(const void *buf, size_t len, const char *label,
                RtSafetensors **out, char *err, size_t errlen);
void rt_st_close(RtSafetensors *st);
/* A hint that nothing will be read for a while: the mapped file's pages
 * leave this process (they stay in the page cache, and the next read
 * faults them back). Nothing for a parsed buffer or where unsupported. */
void rt_st_release(RtSafetensors *st);
/* The same for the whole pages of the mapping inside [p, p + bytes) (a
 * block that was read and will not be for a while; pages it shares with
 * its neighbours stay). Nothing outside the mapping. */
void rt_st_drop(const RtSafetensors *st, const void *p, size_t bytes);

int rt_st_count(const RtSafetensors *st);
const RtStTensor *rt_st_get(const RtSafetensors *st, int i); /* file order by offset */
const RtStTensor *rt_st_find(const RtSafetensors *st, const char *name);
/* The __metadata__ value for key, or NULL. */
const char *rt_st_metadata(const RtSafetensors *st, const char *key);
int64_t rt_st_numel(const RtStTensor *t);

/* Converts to f32 (F32, F16, BF16, F64 accepted); dst holds numel floats.
 * Returns 0, or non-zero with a message for other dtypes. */
int rt_st_read_f32(const RtStTensor *t, float *dst, char *err, size_t errlen);
/* The same for a block of t seen as a matrix [shape[0], the rest's
 * product] (a scalar is [1, 1]): rows [r0, r0 + nr) x columns [c0, c0 +
 * nc), into dst as [nr, nc], or transposed as [nc, nr] (dst[j * nr + i] =
 * t[r0 + i, c0 + j]). A block outside the matrix is refused. Reads straight
 * from the mapped file: no copy of the whole tensor. */
int rt_st_read_f32_block(const RtStTensor *t, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                         int transpose, float *dst, char *err, size_t errlen);
/* Converts integer tensors (I64, I32, I16, I8, U8, BOOL) to int32; values
 * outside [lo, hi] are refused with a message naming the tensor, the index
 * and the value. */
int rt_st_read_i32(const RtStTensor *t, int32_t *dst, int64_t lo, int64_t hi,
                   char *err, size_t errlen);

/* ---- writing ---- */

typedef struct RtStWrite {
  const char *name;
  RtDtype dtype; /* F32, I32, I64, U8 or BOOL */
  int rank;
  int64_t shape[RT_ST_MAX_RANK];
  const void *data; /* host-endian values; written little-endian */
} RtStWrite;

/* Writes tensors (sorted by name in the header, as the reference writer
 * does) and n_meta optional metadata pairs (meta[2k] = key, meta[2k+1] =
 * value, k < n_meta) to
 * path atomically (a temporary file renamed over it). Names and metadata are
 * JSON-escaped. Returns 0 or non-zero with a message. */
int rt_st_write(const char *path, const RtStWrite *tensors, int n,
                const char *const *meta, int n_meta, char *err, size_t errlen);

#endif
