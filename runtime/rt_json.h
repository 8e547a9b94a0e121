/* runtime/rt_json.h — a small strict JSON pull reader (RFC 8259) and a
 * UTF-8 validator, for the safetensors header. Depends on libc only.
 *
 * The reader does not build a tree: the caller walks the document in the
 * order it expects, so memory stays proportional to what the caller keeps,
 * not to the size of the text. Strict: the text must be valid UTF-8; no
 * comments, no trailing commas, no leading zeros, no bare control characters
 * in strings, \u escapes must pair surrogates; nesting is limited to
 * RT_JSON_MAX_DEPTH; after the value only whitespace may follow.
 *
 * Every function returns 0 on success or -1 on error; after an error
 * r->msg holds the message and r->err_pos the byte offset where it was found,
 * and every later call fails too.
 *
 * Example (reads {"a": [1, 2], "b": "x"}):
 *     RtJsonReader r; const char *key; size_t klen; int done;
 *     rt_json_reader_init(&r, text, len);
 *     if (rt_json_object_begin(&r)) goto fail;
 *     while (!rt_json_object_next(&r, &key, &klen, &done) && !done) {
 *       RtJsonType t; rt_json_peek(&r, &t);   // decide by type, then
 *       rt_json_skip_value(&r);               // read or skip the value
 *     }
 *     if (r.failed || rt_json_finish(&r)) goto fail;   // msg in r.msg
 *     rt_json_reader_free(&r);
 */
#ifndef TFMC_RT_JSON_H
#define TFMC_RT_JSON_H

#include <stddef.h>
#include <stdint.h>

#define RT_JSON_MAX_DEPTH 64

/* Returns 1 when s[0..len) is valid UTF-8 (no overlong forms, no surrogates,
 * nothing above U+10FFFF); otherwise 0 with the offset of the first bad byte
 * in *bad_pos (when bad_pos is not NULL). */
int rt_utf8_valid(const void *s, size_t len, size_t *bad_pos);

typedef enum RtJsonType {
  RT_JSON_NULL,
  RT_JSON_BOOL,
  RT_JSON_NUMBER,
  RT_JSON_STRING,
  RT_JSON_ARRAY,
  RT_JSON_OBJECT,
  RT_JSON_TYPE_COUNT
} RtJsonType;

const char *rt_json_type_name(RtJsonType t); /* "null", "a number", ... */

/* A number as written. `integral` is 1 when it has neither a fraction nor an
 * exponent; `exact` is 1 when it is integral and its magnitude is at most
 * 2^53 (then `magnitude` holds it). `text` points into the document. */
typedef struct RtJsonNumber {
  const char *text;
  size_t len;
  int negative, integral, exact;
  uint64_t magnitude;
} RtJsonNumber;

typedef struct RtJsonReader {
  const char *text;
  size_t len, pos;
  int depth;
  unsigned char first[RT_JSON_MAX_DEPTH + 1]; /* no element read yet at this depth */
  unsigned char kind[RT_JSON_MAX_DEPTH + 1];  /* '{' or '[' */
  int failed;
  size_t err_pos;
  char msg[160];
  char *key, *str; /* decoded key / string value, reader-owned */
  size_t key_cap, str_cap;
} RtJsonReader;

/* The reader keeps pointers into text; the caller keeps it alive. */
void rt_json_reader_init(RtJsonReader *r, const char *text, size_t len);
void rt_json_reader_free(RtJsonReader *r);

/* Type of the next value (skipping whitespace), without consuming it. */
int rt_json_peek(RtJsonReader *r, RtJsonType *type);

/* Consumes '{'. Then call rt_json_object_next until *done: each call reads
 * the separator and the next key (decoded, NUL-terminated, valid until the
 * next rt_json_object_next anywhere; it may contain NUL bytes, see *klen)
 * and the ':' after it; the caller must then consume the value. */
int rt_json_object_begin(RtJsonReader *r);
int rt_json_object_next(RtJsonReader *r, const char **key, size_t *klen, int *done);

/* Consumes '['. Then call rt_json_array_next until *done; after each call
 * that is not done the caller consumes one element. */
int rt_json_array_begin(RtJsonReader *r);
int rt_json_array_next(RtJsonReader *r, int *done);

/* Reads a string value: decoded, NUL-terminated, valid until the next
 * rt_json_read_string. */
int rt_json_read_string(RtJsonReader *r, const char **s, size_t *len);
int rt_json_read_number(RtJsonReader *r, RtJsonNumber *n);
/* Reads and validates any value (nesting counts toward the depth limit). */
int rt_json_skip_value(RtJsonReader *r);
/* Checks that only whitespace follows the top-level value. */
int rt_json_finish(RtJsonReader *r);

#endif
