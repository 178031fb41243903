/*
 * fg_token.c — the fg1 wire form: envelope, strict base64url, body layout.
 * The order of the checks is that of the Go reference (fence/codec.go), so
 * that a token rejected for two reasons gets the reason Go gives.
 */
#include "fencegate.h"

#include <string.h>

#define PREFIX "fg1."
#define PREFIX_LEN 4

const char *fg_status_name(fg_status s)
{
    switch (s) {
    case FG_OK: return "ok";
    case FG_ERR_OVERSIZE: return "oversize";
    case FG_ERR_PREFIX: return "prefix";
    case FG_ERR_BASE64: return "base64";
    case FG_ERR_TRUNCATED: return "truncated";
    case FG_ERR_TRAILING: return "trailing";
    case FG_ERR_VERSION: return "version";
    case FG_ERR_INVALID_ID: return "invalid_id";
    case FG_ERR_INVALID_FIELD: return "invalid_field";
    case FG_ERR_UNKNOWN_KEY: return "unknown_key";
    case FG_ERR_SIGNATURE: return "signature";
    case FG_ERR_DOMAIN_MISMATCH: return "domain_mismatch";
    case FG_ERR_STORAGE: return "storage";
    case FG_ERR_CORRUPT: return "corrupt";
    case FG_ERR_ARGUMENT: return "argument";
    }
    return "unknown";
}

static int id_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

int fg_id_valid(const char *s, size_t len)
{
    size_t i;
    if (s == NULL || len == 0 || len > FG_MAX_ID_LEN) {
        return 0;
    }
    for (i = 0; i < len; i++) {
        if (!id_byte((unsigned char)s[i])) {
            return 0;
        }
    }
    return 1;
}

/* b64_value returns the 6-bit value of a base64url character, or -1. */
static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
}

/*
 * b64_check validates s[0..n) as strict unpadded base64url (alphabet only,
 * length not 1 mod 4, zero unused bits in the last character) and sets
 * *decoded to its decoded length.
 */
static fg_status b64_check(const char *s, size_t n, size_t *decoded)
{
    size_t i;
    int last = 0;
    for (i = 0; i < n; i++) {
        last = b64_value((unsigned char)s[i]);
        if (last < 0) {
            return FG_ERR_BASE64;
        }
    }
    switch (n % 4) {
    case 1: return FG_ERR_BASE64;
    case 2: if (last & 0x0f) return FG_ERR_BASE64; break;
    case 3: if (last & 0x03) return FG_ERR_BASE64; break;
    default: break;
    }
    *decoded = n / 4 * 3 + (n % 4 == 0 ? 0 : n % 4 - 1);
    return FG_OK;
}

/*
 * b64_decode decodes the first cap bytes (at most) of s[0..n), which
 * b64_check has accepted, into out.
 */
static void b64_decode(const char *s, size_t n, uint8_t *out, size_t cap)
{
    size_t i, o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (i = 0; i < n && o < cap; i++) {
        acc = (acc << 6) | (uint32_t)b64_value((unsigned char)s[i]);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1u;
        }
    }
}

/* envelope splits the wire form into its body and signature parts. */
static fg_status envelope(const char *wire, size_t len, size_t *body_end)
{
    size_t i;
    if (len > FG_MAX_TOKEN_LEN) {
        return FG_ERR_OVERSIZE;
    }
    if (len < PREFIX_LEN || memcmp(wire, PREFIX, PREFIX_LEN) != 0) {
        return FG_ERR_PREFIX;
    }
    for (i = PREFIX_LEN; i < len; i++) {
        if (!id_byte((unsigned char)wire[i])) {
            return FG_ERR_BASE64;
        }
    }
    for (i = PREFIX_LEN; i < len; i++) {
        if (wire[i] == '.') {
            *body_end = i;
            return FG_OK;
        }
    }
    return FG_ERR_PREFIX;
}

/*
 * split checks the envelope and both parts, decodes the signature into
 * out->signature and the body (its first FG_MAX_BODY_LEN bytes) into
 * out->body, and sets *body_len to the body's full decoded length.
 */
static fg_status split(const char *wire, size_t len, fg_token *out, size_t *body_len)
{
    size_t dot = 0, sig_len = 0;
    const char *body, *sig;
    size_t nbody, nsig;
    fg_status st = envelope(wire, len, &dot);
    if (st != FG_OK) {
        return st;
    }
    body = wire + PREFIX_LEN;
    nbody = dot - PREFIX_LEN;
    sig = wire + dot + 1;
    nsig = len - dot - 1;
    if ((st = b64_check(body, nbody, body_len)) != FG_OK || (st = b64_check(sig, nsig, &sig_len)) != FG_OK) {
        return st;
    }
    if (sig_len < FG_SIGNATURE_LEN) {
        return FG_ERR_TRUNCATED;
    }
    if (sig_len > FG_SIGNATURE_LEN) {
        return FG_ERR_TRAILING;
    }
    b64_decode(sig, nsig, out->signature, FG_SIGNATURE_LEN);
    b64_decode(body, nbody, out->body, FG_MAX_BODY_LEN);
    return FG_OK;
}

static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    int i;
    for (i = 0; i < 8; i++) {
        v = (v << 8) | p[i];
    }
    return v;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* to_int64 reinterprets a u64 as two's complement without
 * implementation-defined conversion. */
static int64_t to_int64(uint64_t u)
{
    if (u <= (uint64_t)INT64_MAX) {
        return (int64_t)u;
    }
    return -(int64_t)(~u) - 1;
}

/*
 * layout reads the two length-prefixed strings after the header. Only the
 * first FG_MAX_BODY_LEN bytes are in out->body; n is the full length. Every
 * byte layout reads lies below 294 (38 + 255 + 1), and a body longer than
 * FG_MAX_BODY_LEN whose layout is exact has an id over 128 bytes, so the
 * answer never depends on bytes that were not kept.
 */
static fg_status layout(const fg_token *out, size_t n, size_t *d, size_t *h)
{
    size_t at = FG_HEADER_LEN;
    if (n - at < 1) {
        return FG_ERR_TRUNCATED;
    }
    *d = out->body[at];
    if (n - at - 1 < *d) {
        return FG_ERR_TRUNCATED;
    }
    at += 1 + *d;
    if (n - at < 1) {
        return FG_ERR_TRUNCATED;
    }
    *h = out->body[at];
    if (n - at - 1 < *h) {
        return FG_ERR_TRUNCATED;
    }
    if (n - at - 1 > *h) {
        return FG_ERR_TRAILING;
    }
    return FG_OK;
}

/* fields validates the ids and numbers and fills out's fields. */
static fg_status fields(fg_token *out, size_t n, size_t d, size_t h)
{
    const uint8_t *b = out->body;
    if (!fg_id_valid((const char *)b + FG_HEADER_LEN + 1, d) || h > FG_MAX_ID_LEN ||
        !fg_id_valid((const char *)b + FG_HEADER_LEN + 2 + d, h)) {
        return FG_ERR_INVALID_ID;
    }
    memcpy(out->key_id, b + 1, FG_KEY_ID_LEN);
    out->epoch = be64(b + 9);
    out->seq = be64(b + 17);
    out->issued_at = to_int64(be64(b + 25));
    out->ttl_ms = be32(b + 33);
    if (out->epoch == 0 || out->seq == 0 || out->ttl_ms == 0) {
        return FG_ERR_INVALID_FIELD;
    }
    out->domain_len = (uint8_t)d;
    memcpy(out->domain, b + FG_HEADER_LEN + 1, d);
    out->domain[d] = '\0';
    out->holder_len = (uint8_t)h;
    memcpy(out->holder, b + FG_HEADER_LEN + 2 + d, h);
    out->holder[h] = '\0';
    out->body_len = (uint16_t)n;
    return FG_OK;
}

fg_status fg_token_parse(const char *wire, size_t len, fg_token *out)
{
    size_t n = 0, d = 0, h = 0;
    fg_status st;
    if (out == NULL || (wire == NULL && len != 0)) {
        return FG_ERR_ARGUMENT;
    }
    if ((st = split(wire, len, out, &n)) != FG_OK) {
        return st;
    }
    if (n < 1) {
        return FG_ERR_TRUNCATED;
    }
    if (out->body[0] != FG_BODY_VERSION) {
        return FG_ERR_VERSION;
    }
    if (n < FG_HEADER_LEN) {
        return FG_ERR_TRUNCATED;
    }
    if ((st = layout(out, n, &d, &h)) != FG_OK) {
        return st;
    }
    return fields(out, n, d, h);
}
