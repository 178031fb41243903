#include "json.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define MAX_DEPTH 16

void jr_init(jr *r, const char *s, size_t len)
{
    static const char empty[] = "";
    if (s == NULL) { /* no args: an empty input, not pointer arithmetic on NULL */
        s = empty;
        len = 0;
    }
    r->p = s;
    r->end = s + len;
    r->err = 0;
}

static void ws(jr *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) {
        r->p++;
    }
}

static int expect(jr *r, char c)
{
    ws(r);
    if (r->err || r->p >= r->end || *r->p != c) {
        r->err = 1;
        return 0;
    }
    r->p++;
    return 1;
}

char jr_peek(jr *r)
{
    ws(r);
    return r->err || r->p >= r->end ? 0 : *r->p;
}

void jr_end(jr *r)
{
    ws(r);
    if (r->p != r->end) {
        r->err = 1;
    }
}

static int hex4(jr *r, unsigned *v)
{
    int i;
    *v = 0;
    for (i = 0; i < 4; i++) {
        char c = r->p < r->end ? *r->p++ : 0;
        unsigned d = (c >= '0' && c <= '9') ? (unsigned)(c - '0')
                   : (c >= 'a' && c <= 'f') ? (unsigned)(c - 'a' + 10)
                   : (c >= 'A' && c <= 'F') ? (unsigned)(c - 'A' + 10) : 16u;
        if (d == 16u) {
            return 0;
        }
        *v = *v << 4 | d;
    }
    return 1;
}

/* put appends byte c to out (cap includes the NUL). */
static void put(jr *r, char *out, size_t cap, size_t *n, unsigned c)
{
    if (out == NULL) {
        return;
    }
    if (*n + 1 >= cap || c == 0) {
        r->err = 1;
        return;
    }
    out[(*n)++] = (char)c;
}

static void put_utf8(jr *r, char *out, size_t cap, size_t *n, unsigned cp)
{
    if (cp < 0x80) {
        put(r, out, cap, n, cp);
    } else if (cp < 0x800) {
        put(r, out, cap, n, 0xC0 | cp >> 6);
        put(r, out, cap, n, 0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        put(r, out, cap, n, 0xE0 | cp >> 12);
        put(r, out, cap, n, 0x80 | ((cp >> 6) & 0x3F));
        put(r, out, cap, n, 0x80 | (cp & 0x3F));
    } else {
        put(r, out, cap, n, 0xF0 | cp >> 18);
        put(r, out, cap, n, 0x80 | ((cp >> 12) & 0x3F));
        put(r, out, cap, n, 0x80 | ((cp >> 6) & 0x3F));
        put(r, out, cap, n, 0x80 | (cp & 0x3F));
    }
}

static void escape(jr *r, char *out, size_t cap, size_t *n)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *hit;
    unsigned cp, lo;
    char c = r->p < r->end ? *r->p++ : 0;
    if (c != 'u') {
        if (c == 0 || (hit = strchr(from, c)) == NULL) {
            r->err = 1;
            return;
        }
        put(r, out, cap, n, (unsigned char)to[hit - from]);
        return;
    }
    if (!hex4(r, &cp)) {
        r->err = 1;
        return;
    }
    if (cp >= 0xD800 && cp < 0xDC00) { /* a high surrogate needs its low half */
        if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u') {
            r->err = 1;
            return;
        }
        r->p += 2;
        if (!hex4(r, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
            r->err = 1;
            return;
        }
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
        r->err = 1;
        return;
    }
    put_utf8(r, out, cap, n, cp);
}

/* string reads a string into out (NULL: validate only). */
static void string(jr *r, char *out, size_t cap, size_t *len)
{
    size_t n = 0;
    if (!expect(r, '"')) {
        return;
    }
    while (!r->err) {
        unsigned char c;
        if (r->p >= r->end) {
            r->err = 1;
            break;
        }
        c = (unsigned char)*r->p++;
        if (c == '"') {
            break;
        }
        if (c < 0x20) {
            r->err = 1;
        } else if (c == '\\') {
            escape(r, out, cap, &n);
        } else {
            put(r, out, cap, &n, c);
        }
    }
    if (out != NULL && cap > 0) {
        out[n < cap ? n : cap - 1] = '\0';
    }
    if (len != NULL) {
        *len = n;
    }
}

void jr_string(jr *r, char *out, size_t cap, size_t *len)
{
    string(r, out, cap, len);
}

static int digit(const jr *r)
{
    return r->p < r->end && *r->p >= '0' && *r->p <= '9';
}

static void number(jr *r)
{
    if (r->p < r->end && *r->p == '-') r->p++;
    if (!digit(r)) { r->err = 1; return; }
    if (*r->p == '0') r->p++;
    else while (digit(r)) r->p++;
    if (r->p < r->end && *r->p == '.') {
        r->p++;
        if (!digit(r)) { r->err = 1; return; }
        while (digit(r)) r->p++;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-')) r->p++;
        if (!digit(r)) { r->err = 1; return; }
        while (digit(r)) r->p++;
    }
}

void jr_int(jr *r, int64_t *v)
{
    int neg = 0;
    uint64_t acc = 0, limit;
    ws(r);
    if (r->p < r->end && *r->p == '-') {
        neg = 1;
        r->p++;
    }
    limit = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    if (!digit(r) || (*r->p == '0' && r->end - r->p > 1 && r->p[1] >= '0' && r->p[1] <= '9')) {
        r->err = 1;
        return;
    }
    while (digit(r)) {
        unsigned d = (unsigned)(*r->p++ - '0');
        if (acc > (limit - d) / 10u) {
            r->err = 1;
            return;
        }
        acc = acc * 10u + d;
    }
    if (r->p < r->end && (*r->p == '.' || *r->p == 'e' || *r->p == 'E')) {
        r->err = 1;
        return;
    }
    *v = neg ? (acc == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)acc) : (int64_t)acc;
}

static void value(jr *r, int depth);

static void members(jr *r, int depth, char close)
{
    r->p++; /* past the opening bracket */
    if (jr_peek(r) == close) {
        r->p++;
        return;
    }
    for (;;) {
        if (close == '}') {
            string(r, NULL, 0, NULL);
            if (!expect(r, ':')) {
                return;
            }
        }
        value(r, depth + 1);
        if (r->err) {
            return;
        }
        ws(r);
        if (r->p < r->end && *r->p == close) {
            r->p++;
            return;
        }
        if (!expect(r, ',')) {
            return;
        }
    }
}

static int literal(jr *r, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, lit, n) != 0) {
        return 0;
    }
    r->p += n;
    return 1;
}

static void value(jr *r, int depth)
{
    char c = jr_peek(r);
    if (depth > MAX_DEPTH) {
        r->err = 1;
    } else if (c == '{' || c == '[') {
        members(r, depth, c == '{' ? '}' : ']');
    } else if (c == '"') {
        string(r, NULL, 0, NULL);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        number(r);
    } else if (!literal(r, "true") && !literal(r, "false") && !literal(r, "null")) {
        r->err = 1;
    }
}

void jr_skip(jr *r, const char **start, size_t *len)
{
    ws(r);
    *start = r->p;
    value(r, 0);
    *len = (size_t)(r->p - *start);
}

int jr_object_next(jr *r, int *first, char *key, size_t cap)
{
    size_t n;
    if (*first) {
        *first = 0;
        if (!expect(r, '{')) {
            return 0;
        }
        if (jr_peek(r) == '}') {
            r->p++;
            return 0;
        }
    } else {
        ws(r);
        if (r->p < r->end && *r->p == '}') {
            r->p++;
            return 0;
        }
        if (!expect(r, ',')) {
            return 0;
        }
    }
    string(r, key, cap, &n);
    expect(r, ':');
    ws(r);
    return !r->err;
}

void jw_init(jw *w, char *buf, size_t cap)
{
    w->buf = buf;
    w->cap = cap;
    w->len = 0;
    w->err = cap == 0;
    if (cap > 0) {
        buf[0] = '\0';
    }
}

static void jw_byte(jw *w, char c)
{
    if (w->err || w->len + 1 >= w->cap) {
        w->err = 1;
        return;
    }
    w->buf[w->len++] = c;
    w->buf[w->len] = '\0';
}

void jw_raw(jw *w, const char *s)
{
    while (*s) {
        jw_byte(w, *s++);
    }
}

void jw_str(jw *w, const char *s, size_t len)
{
    size_t i;
    jw_byte(w, '"');
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            jw_byte(w, '\\');
            jw_byte(w, (char)c);
        } else if (c < 0x20) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", c);
            jw_raw(w, esc);
        } else {
            jw_byte(w, (char)c);
        }
    }
    jw_byte(w, '"');
}

void jw_cstr(jw *w, const char *s)
{
    jw_str(w, s, strlen(s));
}

void jw_u64(jw *w, uint64_t v)
{
    char num[32];
    snprintf(num, sizeof num, "%" PRIu64, v);
    jw_raw(w, num);
}

void jw_i64(jw *w, int64_t v)
{
    char num[32];
    snprintf(num, sizeof num, "%" PRId64, v);
    jw_raw(w, num);
}
