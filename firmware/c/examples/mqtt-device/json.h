/*
 * json.h — the little JSON the reference device needs, without heap: a
 * strict reader of one object's members (RFC 8259; depth-limited) and an
 * escaping writer into a fixed buffer.
 */
#ifndef FGD_JSON_H
#define FGD_JSON_H

#include <stddef.h>
#include <stdint.h>

/* jr reads JSON text p[0..end); err is set on the first error. */
typedef struct {
    const char *p;
    const char *end;
    int err;
} jr;

/* jr_init starts reading s[0..len). */
void jr_init(jr *r, const char *s, size_t len);

/* jr_object_next steps through an object's members: first call with
 * *first = 1 at the '{'. It returns 1 with the member's key unescaped into
 * key (cap bytes, NUL-terminated; longer keys are an error) and r at its
 * value, 0 at the closing '}' (r past it), or 0 with r->err set. */
int jr_object_next(jr *r, int *first, char *key, size_t cap);

/* jr_string reads a string value, unescaped (\uXXXX to UTF-8) into out
 * (cap bytes, NUL-terminated); *len is its length. Longer strings, a NUL
 * inside, invalid escapes or control characters set r->err. */
void jr_string(jr *r, char *out, size_t cap, size_t *len);

/* jr_int reads an integer value (no fraction or exponent) that fits int64. */
void jr_int(jr *r, int64_t *v);

/* jr_skip reads any value, validating it; *start and *len give its text. */
void jr_skip(jr *r, const char **start, size_t *len);

/* jr_peek returns the first byte of the next value (after white space), or 0. */
char jr_peek(jr *r);

/* jr_end sets r->err unless only white space is left. */
void jr_end(jr *r);

/* jw writes JSON into buf[0..cap); overflow sets err (the text is then
 * unusable). */
typedef struct {
    char *buf;
    size_t cap;
    size_t len;
    int err;
} jw;

void jw_init(jw *w, char *buf, size_t cap);
/* jw_raw appends s as is. */
void jw_raw(jw *w, const char *s);
/* jw_str appends s[0..len) as a JSON string, escaped. */
void jw_str(jw *w, const char *s, size_t len);
/* jw_cstr appends the NUL-terminated s as a JSON string. */
void jw_cstr(jw *w, const char *s);
/* jw_u64 and jw_i64 append a number. */
void jw_u64(jw *w, uint64_t v);
void jw_i64(jw *w, int64_t v);

#endif
