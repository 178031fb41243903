/*
 * fuzz_parse — a fuzz target for the parser and verifier, two ways:
 *
 *   - with clang -fsanitize=fuzzer (libFuzzer; FG_LIBFUZZER defined), the
 *     usual LLVMFuzzerTestOneInput;
 *   - otherwise a bounded random mutation loop over the Go-signed tokens:
 *     fuzz_parse <testdata dir> <iterations> <seed>.
 *
 * For every input it asserts:
 *   1. verify succeeds only if parse does, and a parse failure is verify's
 *      answer too (the reasons come in Go's order);
 *   2. a parsed token is the one spelling of its body and signature: the
 *      input re-encodes to itself, its ids are valid and its numbers non-zero
 *      (Go accepts exactly that);
 *   3. never accepts what Go rejects: a token that verifies must be one of
 *      the tokens Go signed and accepted in testdata (tokens.txt,
 *      positions.txt, fence.txt). No fuzzer can forge Ed25519, so any other
 *      accepted input is a token Go rejects.
 * A failed assertion prints the input in hex and aborts.
 *
 * The testdata directory comes from argv (loop) or FG_TESTDATA (libFuzzer).
 */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#define MAX_KNOWN 2048
#define MAX_BASES 64
#define WIRE_CAP 1100

static fg_key keys[TU_MAX_KEYS];
static fg_keyring ring;
static uint64_t known[MAX_KNOWN]; /* FNV-1a of every Go-accepted token */
static size_t nknown;
static char bases[MAX_BASES][WIRE_CAP]; /* Go-accepted tokens to mutate */
static size_t base_len[MAX_BASES];
static size_t nbases;

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    size_t i;
    for (i = 0; i < n; i++) {
        h = (h ^ p[i]) * 1099511628211ull;
    }
    return h ^ n;
}

static void add_known(const char *wire, size_t n)
{
    if (nknown < MAX_KNOWN) {
        known[nknown++] = fnv((const uint8_t *)wire, n);
    }
    if (nbases < MAX_BASES && n < WIRE_CAP) {
        memcpy(bases[nbases], wire, n);
        base_len[nbases++] = n;
    }
}

static int is_known(const uint8_t *p, size_t n)
{
    uint64_t h = fnv(p, n);
    size_t i;
    for (i = 0; i < nknown; i++) {
        if (known[i] == h) {
            return 1;
        }
    }
    return 0;
}

/* load reads the ring and every Go-accepted token of dir. */
static void load(const char *dir)
{
    static char line[16384];
    static uint8_t wire[4096];
    char path[4096], *f[16];
    const char *files[3] = {"tokens.txt", "positions.txt", "fence.txt"};
    int i;
    snprintf(path, sizeof path, "%s/tokens.txt", dir);
    if (tu_load_ring(path, keys, &ring) != 0) {
        fprintf(stderr, "fuzz_parse: no key ring in %s\n", path);
        exit(2);
    }
    for (i = 0; i < 3; i++) {
        FILE *in = tu_open(dir, files[i]);
        while (fgets(line, sizeof line, in) != NULL) {
            int n = 0;
            char *tok = strtok(line, " \n");
            while (tok != NULL && n < 16) {
                f[n++] = tok;
                tok = strtok(NULL, " \n");
            }
            if (i == 0 && n == 12 && strcmp(f[0], "tok") == 0 && strcmp(f[3], "ok") == 0) {
                long len = tu_unhex(f[2], wire, sizeof wire);
                add_known((const char *)wire, (size_t)len);
            } else if (i == 1 && n == 5 && strcmp(f[0], "tok") == 0) {
                add_known(f[1], strlen(f[1]));
            } else if (i == 2 && n == 4 && strcmp(f[0], "step") == 0) {
                add_known(f[1], strlen(f[1]));
            }
        }
        fclose(in);
    }
}

static void fail(const char *why, const uint8_t *p, size_t n)
{
    size_t i;
    fprintf(stderr, "fuzz_parse: %s; input (%lu bytes): ", why, (unsigned long)n);
    for (i = 0; i < n; i++) {
        fprintf(stderr, "%02x", p[i]);
    }
    fputc('\n', stderr);
    abort();
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static size_t encode(const uint8_t *in, size_t n, char *out)
{
    size_t i, o = 0;
    for (i = 0; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = b64[v >> 18];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = b64[(v >> 6) & 63];
        out[o++] = b64[v & 63];
    }
    if (n - i == 1) {
        out[o++] = b64[in[i] >> 2];
        out[o++] = b64[(in[i] & 3) << 4];
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 8 | in[i + 1];
        out[o++] = b64[v >> 10];
        out[o++] = b64[(v >> 4) & 63];
        out[o++] = b64[(v & 15) << 2];
    }
    return o;
}

/* canonical reports whether the input is the wire form of t. */
static int canonical(const fg_token *t, const uint8_t *p, size_t n)
{
    char w[FG_MAX_TOKEN_LEN + 8];
    size_t o = 4;
    memcpy(w, "fg1.", 4);
    o += encode(t->body, t->body_len, w + o);
    w[o++] = '.';
    o += encode(t->signature, FG_SIGNATURE_LEN, w + o);
    return o == n && memcmp(w, p, n) == 0;
}

static void check(const uint8_t *p, size_t n)
{
    fg_token t;
    fg_status parse = fg_token_parse((const char *)p, n, &t);
    fg_status verify;
    if (parse == FG_OK && (!canonical(&t, p, n) || !fg_id_valid(t.domain, t.domain_len) ||
                           !fg_id_valid(t.holder, t.holder_len) || t.epoch == 0 || t.seq == 0 || t.ttl_ms == 0)) {
        fail("parse accepted a token that is not the one spelling of valid fields", p, n);
    }
    verify = fg_token_verify(&ring, (const char *)p, n, &t);
    if (parse != FG_OK && verify != parse) {
        fail("verify and parse disagree on a parse failure", p, n);
    }
    if (parse == FG_OK && verify != FG_OK && verify != FG_ERR_UNKNOWN_KEY && verify != FG_ERR_SIGNATURE) {
        fail("verify failed a parsed token for a parse reason", p, n);
    }
    if (verify == FG_OK && !is_known(p, n)) {
        fail("verify accepted a token Go never signed (Go rejects it)", p, n);
    }
}

#ifdef FG_LIBFUZZER
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *dir = getenv("FG_TESTDATA");
    (void)argc;
    (void)argv;
    load(dir != NULL ? dir : "testdata");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check(data, size);
    return 0;
}
#else

/* rng is xorshift64*, seeded from the command line: runs repeat exactly. */
static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ull) >> 33) % n;
}

/* mutate applies 1..4 random edits to w[0..*n) (capacity WIRE_CAP). */
static void mutate(uint8_t *w, size_t *n)
{
    static const uint8_t specials[] = {'.', '=', '-', '_', 'A', '/', '+', 0, 0xff, '\n', ' '};
    int edits = 1 + (int)rnd(4), e;
    for (e = 0; e < edits; e++) {
        size_t at = *n == 0 ? 0 : rnd((uint32_t)*n);
        switch (rnd(6)) {
        case 0: if (*n) w[at] = (uint8_t)rnd(256); break;
        case 1: if (*n) w[at] = specials[rnd(sizeof specials)]; break;
        case 2: if (*n) { memmove(w + at, w + at + 1, *n - at - 1); (*n)--; } break;
        case 3: if (*n + 1 < WIRE_CAP) { memmove(w + at + 1, w + at, *n - at); w[at] = (uint8_t)b64[rnd(64)]; (*n)++; } break;
        case 4: *n = at; break;
        default: {
            size_t b = rnd((uint32_t)nbases), from = rnd((uint32_t)base_len[b]), len = base_len[b] - from;
            if (at + len > WIRE_CAP) len = WIRE_CAP - at;
            memcpy(w + at, bases[b] + from, len); /* splice another token's tail */
            *n = at + len;
        }
        }
    }
}

int main(int argc, char **argv)
{
    static uint8_t w[WIRE_CAP];
    long iterations, i;
    size_t n;
    if (argc != 4) {
        fprintf(stderr, "usage: fuzz_parse <testdata dir> <iterations> <seed>\n");
        return 2;
    }
    load(argv[1]);
    iterations = atol(argv[2]);
    rng_state = strtoull(argv[3], NULL, 10) | 1;
    for (i = 0; i < (long)nbases; i++) {
        check((const uint8_t *)bases[i], base_len[i]);
    }
    for (i = 0; i < iterations; i++) {
        size_t b = rnd((uint32_t)nbases);
        memcpy(w, bases[b], base_len[b]);
        n = base_len[b];
        mutate(w, &n);
        check(w, n);
    }
    printf("%ld passed, 0 failed\n", iterations + (long)nbases);
    return 0;
}
#endif
