/*
 * test_fence — the fence's storage under failure: power cut at every byte
 * of a record write, failed writes and reads, corrupt and foreign slots,
 * the file backend, and argument checks.
 *
 * usage: test_fence <scratch dir>
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"
#include "fg_storage_file.h"

#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static fg_token tok(const char *domain, uint64_t epoch, uint64_t seq, const char *holder, int64_t issued)
{
    fg_token t;
    memset(&t, 0, sizeof t);
    t.domain_len = (uint8_t)strlen(domain);
    memcpy(t.domain, domain, t.domain_len);
    t.holder_len = (uint8_t)strlen(holder);
    memcpy(t.holder, holder, t.holder_len);
    t.epoch = epoch;
    t.seq = seq;
    t.issued_at = issued;
    t.ttl_ms = 1000;
    return t;
}

/* at reports whether f holds exactly t's lease. */
static int at(const fg_fence *f, const fg_token *t)
{
    return f->has_lease && f->lease.epoch == t->epoch && f->lease.seq == t->seq && f->lease.issued_at == t->issued_at &&
           strcmp(f->lease.holder, t->holder) == 0;
}

static void test_crc(tu_counts *c)
{
    tu_check(c, fg_crc32(0, (const uint8_t *)"123456789", 9) == 0xCBF43926u, "crc32 check value");
}

static void test_blank(tu_counts *c)
{
    static const uint8_t fills[2] = {0x00, 0xFF};
    int i;
    for (i = 0; i < 2; i++) {
        tu_mem m;
        fg_storage s;
        fg_fence f;
        fg_token t = tok("press-7", 1, 1, "a", 5);
        fg_check o;
        tu_mem_init(&m, fills[i], &s);
        tu_check(c, fg_fence_open(&f, "press-7", 7, &s) == FG_OK && !f.has_lease, "blank 0x%02x opens empty", fills[i]);
        tu_check(c, fg_fence_check(&f, &t) == FG_CHECK_NEWER, "empty fence: any token is newer");
        tu_check(c, fg_fence_raise(&f, &t, &o) == FG_OK && o == FG_CHECK_NEWER && at(&f, &t), "first raise");
        tu_check(c, fg_fence_open(&f, "press-7", 7, &s) == FG_OK && at(&f, &t), "first raise survives reopen");
    }
}

/* test_outcomes: only a newer token writes. */
static void test_outcomes(tu_counts *c)
{
    tu_mem m;
    fg_storage s;
    fg_fence f;
    fg_check o;
    fg_token t1 = tok("press-7", 2, 5, "a", 5), same = tok("press-7", 2, 5, "a", 5), other = tok("press-7", 2, 5, "b", 5),
             later = tok("press-7", 2, 5, "a", 6), old = tok("press-7", 1, 99, "a", 5), foreign = tok("press-8", 9, 9, "a", 5);
    tu_mem_init(&m, 0xFF, &s);
    fg_fence_open(&f, "press-7", 7, &s);
    fg_fence_raise(&f, &t1, &o);
    same.ttl_ms = 5;
    tu_check(c, fg_fence_raise(&f, &same, &o) == FG_OK && o == FG_CHECK_SAME_LEASE, "same lease, other ttl");
    tu_check(c, fg_fence_raise(&f, &other, &o) == FG_OK && o == FG_CHECK_CONFLICT, "same position, other holder");
    tu_check(c, fg_fence_raise(&f, &later, &o) == FG_OK && o == FG_CHECK_CONFLICT, "same position, other issued_at");
    tu_check(c, fg_fence_raise(&f, &old, &o) == FG_OK && o == FG_CHECK_STALE, "older epoch, larger seq");
    tu_check(c, fg_fence_raise(&f, &foreign, &o) == FG_OK && o == FG_CHECK_WRONG_DOMAIN, "other domain");
    tu_check(c, m.writes == 1 && at(&f, &t1), "only the newer token wrote (%ld writes)", m.writes);
}

/* raise_ok raises t and reports success. */
static int raise_ok(fg_fence *f, const fg_token *t)
{
    fg_check o;
    return fg_fence_raise(f, t, &o) == FG_OK && o == FG_CHECK_NEWER;
}

/*
 * test_power_cut: with the fence at `before` (after `history` raises), a
 * raise to the next lease is cut after every possible number of bytes; the
 * fence reopened from storage must be the old one (or the new one only if
 * all bytes made it), and a raise after the reboot must land.
 */
static void test_power_cut(tu_counts *c, int history)
{
    long k;
    for (k = 0; k <= FG_FENCE_RECORD_LEN; k++) {
        tu_mem m;
        fg_storage s;
        fg_fence f;
        fg_token before = tok("press-7", 1, (uint64_t)history, "a", 1);
        fg_token next = tok("press-7", 1, (uint64_t)history + 1, "b", 2), after = tok("press-7", 2, 1, "c", 3);
        fg_check o;
        int i, ok;
        tu_mem_init(&m, 0xFF, &s);
        fg_fence_open(&f, "press-7", 7, &s);
        for (i = 1; i <= history; i++) {
            fg_token t = tok("press-7", 1, (uint64_t)i, "a", 1);
            raise_ok(&f, &t);
        }
        m.tear_at = k;
        ok = fg_fence_raise(&f, &next, &o) == FG_ERR_STORAGE && (history == 0 ? !f.has_lease : at(&f, &before));
        tu_check(c, ok, "cut at %ld after %d raises: raise must fail and leave the fence", k, history);
        ok = fg_fence_open(&f, "press-7", 7, &s) == FG_OK;
        if (k == FG_FENCE_RECORD_LEN) {
            ok = ok && at(&f, &next);
        } else {
            ok = ok && (history == 0 ? !f.has_lease : at(&f, &before));
        }
        tu_check(c, ok, "cut at %ld after %d raises: reboot finds the %s fence", k, history,
                 k == FG_FENCE_RECORD_LEN ? "new" : "old");
        tu_check(c, raise_ok(&f, &after) && fg_fence_open(&f, "press-7", 7, &s) == FG_OK && at(&f, &after),
                 "cut at %ld after %d raises: next raise lands", k, history);
    }
}

static void test_failures(tu_counts *c)
{
    tu_mem m;
    fg_storage s;
    fg_fence f;
    fg_check o;
    fg_token t1 = tok("press-7", 1, 1, "a", 1), t2 = tok("press-7", 1, 2, "a", 1);
    tu_mem_init(&m, 0xFF, &s);
    m.fail_reads = 1;
    tu_check(c, fg_fence_open(&f, "press-7", 7, &s) == FG_ERR_STORAGE, "read failure is reported");
    tu_check(c, fg_fence_open(&f, "press-7", 7, &s) == FG_OK, "open after a read failure");
    raise_ok(&f, &t1);
    m.fail_writes = 1;
    tu_check(c, fg_fence_raise(&f, &t2, &o) == FG_ERR_STORAGE && at(&f, &t1), "write failure leaves the fence");
    tu_check(c, raise_ok(&f, &t2) && at(&f, &t2), "raise after a write failure");
    tu_check(c, fg_fence_open(&f, "press-7", 7, &s) == FG_OK && at(&f, &t2), "reopen after a write failure");
}

static void test_corruption(tu_counts *c)
{
    tu_mem m;
    fg_storage s;
    fg_fence f;
    fg_token t1 = tok("press-7", 1, 1, "a", 1), t2 = tok("press-7", 1, 2, "a", 1);
    unsigned newest;
    tu_mem_init(&m, 0xFF, &s);
    fg_fence_open(&f, "press-7", 7, &s);
    raise_ok(&f, &t1);
    raise_ok(&f, &t2);
    newest = 1u - f.next_slot;
    m.slot[newest][20] ^= 0x01;
    tu_check(c, fg_fence_open(&f, "press-7", 7, &s) == FG_OK && at(&f, &t1), "a corrupt newest slot falls back to the older");
    m.slot[1u - newest][20] ^= 0x01;
    tu_check(c, fg_fence_open(&f, "press-7", 7, &s) == FG_ERR_CORRUPT, "two corrupt slots are reported, not forgotten");
    tu_mem_init(&m, 0x00, &s);
    m.slot[0][7] = 0x42;
    tu_check(c, fg_fence_open(&f, "press-7", 7, &s) == FG_OK && !f.has_lease, "a torn first write and a blank slot: empty");
}

/* test_foreign: records of another domain are not this fence's, and a raise
 * never overwrites this domain's record. */
static void test_foreign(tu_counts *c)
{
    tu_mem m;
    fg_storage s;
    fg_fence f, g;
    fg_token mine = tok("press-7", 1, 1, "a", 1), theirs = tok("press-8", 5, 5, "a", 1), mine2 = tok("press-7", 1, 2, "a", 1);
    tu_mem_init(&m, 0xFF, &s);
    fg_fence_open(&f, "press-7", 7, &s);
    raise_ok(&f, &mine);
    fg_fence_open(&g, "press-8", 7, &s);
    tu_check(c, !g.has_lease, "another domain's fence is empty");
    raise_ok(&g, &theirs);
    tu_check(c, fg_fence_open(&f, "press-7", 7, &s) == FG_OK && at(&f, &mine), "the domain's record survived a foreign raise");
    m.tear_at = 10;
    fg_fence_raise(&f, &mine2, &(fg_check){0});
    tu_check(c, fg_fence_open(&f, "press-7", 7, &s) == FG_OK && at(&f, &mine), "a torn write spoils the foreign slot, not ours");
}

static void test_file(tu_counts *c, const char *dir)
{
    char path[4096];
    fg_file_storage fs;
    fg_storage s;
    fg_fence f;
    fg_token t1 = tok("press-7", 1, 1, "a", 1), t2 = tok("press-7", 3, 2, "b", -7);
    struct stat st;
    int fd;
    snprintf(path, sizeof path, "%s/fence.bin", dir);
    unlink(path);
    tu_check(c, fg_file_storage_open(&fs, path, &s) == 0, "file storage opens %s", path);
    tu_check(c, fg_fence_open(&f, "press-7", 7, &s) == FG_OK && !f.has_lease, "new file: empty fence");
    tu_check(c, raise_ok(&f, &t1) && raise_ok(&f, &t2), "file raises");
    fg_file_storage_close(&fs);
    tu_check(c, stat(path, &st) == 0 && st.st_size == 2 * FG_FENCE_RECORD_LEN, "file holds two slots");
    tu_check(c, fg_file_storage_open(&fs, path, &s) == 0 && fg_fence_open(&f, "press-7", 7, &s) == FG_OK && at(&f, &t2),
             "file reopened: newest lease");
    fg_file_storage_close(&fs);
    fd = open(path, O_WRONLY);
    tu_check(c, fd >= 0 && pwrite(fd, "X", 1, FG_FENCE_RECORD_LEN * (off_t)(1u - f.next_slot) + 30) == 1, "corrupt the file");
    close(fd);
    tu_check(c, fg_file_storage_open(&fs, path, &s) == 0 && fg_fence_open(&f, "press-7", 7, &s) == FG_OK && at(&f, &t1),
             "file with a corrupt newest slot: older lease");
    fg_file_storage_close(&fs);
}

static void test_arguments(tu_counts *c)
{
    tu_mem m;
    fg_storage s;
    fg_fence f;
    fg_token t;
    fg_check o;
    fg_token bad = tok("press-7", 1, 1, "", 1);
    int order = 0;
    tu_mem_init(&m, 0xFF, &s);
    tu_check(c, fg_fence_open(&f, "press/7", 7, &s) == FG_ERR_ARGUMENT, "invalid domain refused");
    tu_check(c, fg_fence_open(NULL, "press-7", 7, &s) == FG_ERR_ARGUMENT, "NULL fence refused");
    tu_check(c, fg_fence_open(&f, "press-7", 7, NULL) == FG_ERR_ARGUMENT, "NULL storage refused");
    fg_fence_open(&f, "press-7", 7, &s);
    tu_check(c, fg_fence_raise(&f, &bad, &o) == FG_ERR_ARGUMENT && m.writes == 0, "a token with an empty holder is refused");
    tu_check(c, fg_token_parse(NULL, 0, &t) == FG_ERR_PREFIX, "NULL empty wire: prefix");
    tu_check(c, fg_token_parse("fg1.", 4, NULL) == FG_ERR_ARGUMENT, "NULL out refused");
    tu_check(c, fg_token_compare(&t, NULL, &order) == FG_ERR_ARGUMENT, "NULL token refused");
    tu_check(c, strcmp(fg_status_name((fg_status)99), "unknown") == 0 && strcmp(fg_check_name((fg_check)0), "unknown") == 0,
             "names of values outside the enums");
}

int main(int argc, char **argv)
{
    tu_counts c = {0, 0, 0};
    int h;
    test_crc(&c);
    test_blank(&c);
    test_outcomes(&c);
    for (h = 0; h <= 3; h++) {
        test_power_cut(&c, h);
    }
    test_failures(&c);
    test_corruption(&c);
    test_foreign(&c);
    test_file(&c, argc > 1 ? argv[1] : ".");
    test_arguments(&c);
    return tu_finish(&c);
}
