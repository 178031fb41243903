/*
 * test_vectors — checks the library against the Go implementation's answers
 * in testdata/ (written by firmware/vectors): every token's parse and verify
 * outcome and fields, every single-byte change of the base tokens, every
 * position and token comparison, every fence transition.
 *
 * usage: test_vectors <testdata dir>
 */
#include "testutil.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_LEN 16384
#define WIRE_MAX 4096

static char line[LINE_MAX_LEN];
static fg_key keys[TU_MAX_KEYS];
static fg_keyring ring;

/* code is the one-letter code of mutations.txt for a status. */
static char code(fg_status s)
{
    static const char codes[] = "ozpbtrvifksd";
    return (unsigned)s < sizeof codes - 1 ? codes[s] : '?';
}

static int fields_match(const fg_token *t, char **f)
{
    char id[17], num[4][32];
    size_t i;
    for (i = 0; i < FG_KEY_ID_LEN; i++) {
        snprintf(id + 2 * i, 3, "%02x", t->key_id[i]);
    }
    snprintf(num[0], sizeof num[0], "%" PRIu64, t->epoch);
    snprintf(num[1], sizeof num[1], "%" PRIu64, t->seq);
    snprintf(num[2], sizeof num[2], "%" PRId64, t->issued_at);
    snprintf(num[3], sizeof num[3], "%" PRIu32, t->ttl_ms);
    return strcmp(id, f[0]) == 0 && strcmp(num[0], f[1]) == 0 && strcmp(num[1], f[2]) == 0 &&
           strcmp(num[2], f[3]) == 0 && strcmp(num[3], f[4]) == 0 && strcmp(t->domain, f[5]) == 0 &&
           strcmp(t->holder, f[6]) == 0 && strlen(t->domain) == t->domain_len && strlen(t->holder) == t->holder_len;
}

/* split cuts s at spaces into at most max fields. */
static int split(char *s, char **f, int max)
{
    int n = 0;
    char *tok = strtok(s, " \n");
    while (tok != NULL && n < max) {
        f[n++] = tok;
        tok = strtok(NULL, " \n");
    }
    return n;
}

static void check_token_line(tu_counts *c, char **f)
{
    static uint8_t wire[WIRE_MAX];
    fg_token t;
    long n = tu_unhex(f[2], wire, sizeof wire);
    fg_status v, p;
    if (!tu_check(c, n >= 0, "%s: bad hex", f[1])) {
        return;
    }
    v = fg_token_verify(&ring, (const char *)wire, (size_t)n, &t);
    tu_check(c, strcmp(fg_status_name(v), f[3]) == 0, "%s: verify %s, Go says %s", f[1], fg_status_name(v), f[3]);
    p = fg_token_parse((const char *)wire, (size_t)n, &t);
    tu_check(c, strcmp(fg_status_name(p), f[4]) == 0, "%s: parse %s, Go says %s", f[1], fg_status_name(p), f[4]);
    if (p == FG_OK) {
        tu_check(c, fields_match(&t, f + 5), "%s: fields differ from Go's", f[1]);
    }
}

static void run_tokens(tu_counts *c, const char *dir)
{
    FILE *in = tu_open(dir, "tokens.txt");
    char *f[16];
    long lines = 0;
    while (fgets(line, sizeof line, in) != NULL) {
        if (strncmp(line, "tok ", 4) != 0) {
            continue;
        }
        lines++;
        if (tu_check(c, split(line, f, 16) == 12, "tokens.txt: malformed line %ld", lines)) {
            check_token_line(c, f);
        }
    }
    fclose(in);
    tu_check(c, lines > 50, "tokens.txt: only %ld vectors", lines);
}

/* mutation state: the base token being changed. */
static uint8_t base[WIRE_MAX];
static size_t base_len;
static char base_name[256];

/* check_one compares the answers for wire[0..n) with codes vc and pc. */
static void check_one(tu_counts *c, const uint8_t *wire, size_t n, char vc, char pc, const char *what, long i, int value)
{
    fg_token t;
    char v = code(fg_token_verify(&ring, (const char *)wire, n, &t));
    char p = code(fg_token_parse((const char *)wire, n, &t));
    tu_check(c, v == vc && p == pc, "%s %s at %ld (byte 0x%02x): C verify/parse %c/%c, Go %c/%c", base_name, what, i,
             value, v, p, vc, pc);
}

static void check_sub(tu_counts *c, char **f)
{
    static uint8_t w[WIRE_MAX];
    long pos = atol(f[1]);
    int v;
    if (!tu_check(c, pos >= 0 && (size_t)pos < base_len && strlen(f[2]) == 256 && strlen(f[3]) == 256,
                  "%s: malformed sub line", base_name)) {
        return;
    }
    memcpy(w, base, base_len);
    for (v = 0; v < 256; v++) {
        w[pos] = (uint8_t)v;
        check_one(c, w, base_len, f[2][v], f[3][v], "sub", pos, v);
    }
}

/* check_edit runs one del/ins/cut line: codes for every position. */
static void check_edit(tu_counts *c, const char *kind, int ins, const char *vcodes, const char *pcodes)
{
    static uint8_t w[WIRE_MAX + 1];
    size_t n = strlen(vcodes), i;
    if (!tu_check(c, strlen(pcodes) == n, "%s: malformed %s line", base_name, kind)) {
        return;
    }
    for (i = 0; i < n; i++) {
        size_t len = 0;
        if (strcmp(kind, "del") == 0 && i < base_len) {
            memcpy(w, base, i);
            memcpy(w + i, base + i + 1, base_len - i - 1);
            len = base_len - 1;
        } else if (strcmp(kind, "ins") == 0 && i <= base_len) {
            memcpy(w, base, i);
            w[i] = (uint8_t)ins;
            memcpy(w + i + 1, base + i, base_len - i);
            len = base_len + 1;
        } else if (strcmp(kind, "cut") == 0 && i < base_len) {
            memcpy(w, base, i);
            len = i;
        } else {
            tu_check(c, 0, "%s: %s line longer than the base", base_name, kind);
            return;
        }
        check_one(c, w, len, vcodes[i], pcodes[i], kind, (long)i, i < base_len ? base[i] : ins);
    }
}

static void mutation_line(tu_counts *c, char **f, int n)
{
    if (strcmp(f[0], "base") == 0 && n == 3) {
        long len = tu_unhex(f[2], base, sizeof base);
        snprintf(base_name, sizeof base_name, "%s", f[1]);
        base_len = len < 0 ? 0 : (size_t)len;
        tu_check(c, len > 0, "%s: bad base", f[1]);
    } else if (strcmp(f[0], "sub") == 0 && n == 4) {
        check_sub(c, f);
    } else if ((strcmp(f[0], "del") == 0 || strcmp(f[0], "cut") == 0) && n == 3) {
        check_edit(c, f[0], 0, f[1], f[2]);
    } else if (strcmp(f[0], "ins") == 0 && n == 4) {
        check_edit(c, f[0], (int)strtol(f[1], NULL, 16), f[2], f[3]);
    } else {
        tu_check(c, 0, "mutations.txt: malformed line starting %s", f[0]);
    }
}

static void run_mutations(tu_counts *c, const char *dir)
{
    FILE *in = tu_open(dir, "mutations.txt");
    char *f[8];
    long before = c->passed + c->failed;
    while (fgets(line, sizeof line, in) != NULL) {
        int n;
        if (line[0] == '#' || line[0] == '\n') {
            continue;
        }
        n = split(line, f, 8);
        mutation_line(c, f, n);
    }
    fclose(in);
    tu_check(c, c->passed + c->failed - before > 100000, "mutations.txt: too few mutations");
}

static int parse_ok(tu_counts *c, const char *wire, fg_token *t)
{
    fg_status st = fg_token_verify(&ring, wire, strlen(wire), t);
    return tu_check(c, st == FG_OK, "token %.40s… does not verify: %s", wire, fg_status_name(st));
}

static void check_pair(tu_counts *c, char **f)
{
    static fg_token a, b;
    int order = 9, st;
    char got[32];
    if (!parse_ok(c, f[1], &a) || !parse_ok(c, f[2], &b)) {
        return;
    }
    st = fg_token_compare(&a, &b, &order);
    if (st == FG_ERR_DOMAIN_MISMATCH) {
        snprintf(got, sizeof got, "domain_mismatch");
    } else {
        snprintf(got, sizeof got, "%d", order);
    }
    tu_check(c, strcmp(got, f[3]) == 0, "compare %s@%" PRIu64 ".%" PRIu64 " with %s@%" PRIu64 ".%" PRIu64 ": C %s, Go %s",
             a.domain, a.epoch, a.seq, b.domain, b.epoch, b.seq, got, f[3]);
    tu_check(c, fg_token_same_lease(&a, &b) == atoi(f[4]), "same lease %s/%s: Go says %s", a.holder, b.holder, f[4]);
}

static void run_positions(tu_counts *c, const char *dir)
{
    FILE *in = tu_open(dir, "positions.txt");
    char *f[8];
    while (fgets(line, sizeof line, in) != NULL) {
        int n;
        if (line[0] == '#') {
            continue;
        }
        n = split(line, f, 8);
        if (n == 6 && strcmp(f[0], "pos") == 0) {
            uint64_t e1 = strtoull(f[1], NULL, 10), s1 = strtoull(f[2], NULL, 10);
            uint64_t e2 = strtoull(f[3], NULL, 10), s2 = strtoull(f[4], NULL, 10);
            int got = fg_position_compare(e1, s1, e2, s2);
            tu_check(c, got == atoi(f[5]), "position %s.%s vs %s.%s: C %d, Go %s", f[1], f[2], f[3], f[4], got, f[5]);
        } else if (tu_check(c, n == 5 && strcmp(f[0], "tok") == 0, "positions.txt: malformed line")) {
            check_pair(c, f);
        }
    }
    fclose(in);
}

/* fence_text formats the fence as fence.txt does. */
static void fence_text(const fg_fence *f, char *out, size_t cap)
{
    if (!f->has_lease) {
        snprintf(out, cap, "none");
        return;
    }
    snprintf(out, cap, "%" PRIu64 ":%" PRIu64 ":%s:%" PRId64, f->lease.epoch, f->lease.seq, f->lease.holder,
             f->lease.issued_at);
}

static tu_mem mem;
static fg_storage storage;
static fg_fence fence;
static long step_no;

static void fence_step(tu_counts *c, char **f)
{
    static fg_token t;
    fg_check outcome = 0;
    fg_status st;
    char after[512];
    step_no++;
    if (!parse_ok(c, f[1], &t)) {
        return;
    }
    st = fg_fence_raise(&fence, &t, &outcome);
    fence_text(&fence, after, sizeof after);
    tu_check(c, st == FG_OK && strcmp(fg_check_name(outcome), f[2]) == 0, "fence step %ld: C %s/%s, Go %s", step_no,
             fg_status_name(st), fg_check_name(outcome), f[2]);
    tu_check(c, strcmp(after, f[3]) == 0, "fence step %ld: fence %s, Go %s", step_no, after, f[3]);
}

static void fence_reopen(tu_counts *c)
{
    char before[512], after[512];
    fg_status st;
    fence_text(&fence, before, sizeof before);
    st = fg_fence_open(&fence, fence.domain, fence.domain_len, &storage);
    fence_text(&fence, after, sizeof after);
    tu_check(c, st == FG_OK && strcmp(before, after) == 0, "reopen after step %ld: %s, fence %s, was %s", step_no,
             fg_status_name(st), after, before);
}

static void run_fence(tu_counts *c, const char *dir)
{
    FILE *in = tu_open(dir, "fence.txt");
    char *f[8];
    long steps = 0;
    while (fgets(line, sizeof line, in) != NULL) {
        int n;
        if (line[0] == '#') {
            continue;
        }
        n = split(line, f, 8);
        if (n == 2 && strcmp(f[0], "fence") == 0) {
            tu_mem_init(&mem, 0xFF, &storage);
            tu_check(c, fg_fence_open(&fence, f[1], strlen(f[1]), &storage) == FG_OK, "open fence %s", f[1]);
        } else if (n == 1 && strcmp(f[0], "reopen") == 0) {
            fence_reopen(c);
        } else if (tu_check(c, n == 4 && strcmp(f[0], "step") == 0, "fence.txt: malformed line")) {
            fence_step(c, f);
            steps++;
        }
    }
    fclose(in);
    tu_check(c, steps > 100, "fence.txt: only %ld steps", steps);
}

int main(int argc, char **argv)
{
    tu_counts c = {0, 0, 0};
    const char *dir = argc > 1 ? argv[1] : "testdata";
    char path[4096];
    snprintf(path, sizeof path, "%s/tokens.txt", dir);
    if (tu_load_ring(path, keys, &ring) != 0) {
        fprintf(stderr, "test_vectors: no key ring in %s\n", path);
        return 2;
    }
    run_tokens(&c, dir);
    run_mutations(&c, dir);
    run_positions(&c, dir);
    run_fence(&c, dir);
    return tu_finish(&c);
}
