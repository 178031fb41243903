/*
 * attack_fence — attacks on the two-slot fence (src/fg_fence.c) that end
 * with a device acting on a token older than one it acted on before
 * (invariant I2 for the device). Each check states the scenario; each is
 * expected to FAIL on the code as it is, for the reason its message gives.
 *
 *   1. generation wrap: a valid record whose generation is 2^64-1. The
 *      next raise writes generation 0, which fg_fence_open never accepts
 *      (decode: generation == 0 is invalid), yet fg_fence_raise reports
 *      FG_OK/NEWER, so the device acts on the new token; after a reboot the
 *      old record wins: the fence went back one lease.
 *   2. two domains' fences on one storage (the docs: "Records of another
 *      domain in the same storage are ignored and never overwrite the
 *      domain's current record"): with both fences open, the second
 *      domain's first raise goes to the slot its open saw as free — the
 *      slot the first domain has written since — and destroys the first
 *      domain's only record; after a reboot that domain's fence is empty
 *      and a stale token is NEWER.
 *
 * usage: attack_fence
 */
#include "testutil.h"

#include <string.h>

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

static void put64(uint8_t *p, uint64_t v)
{
    int i;
    for (i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

/*
 * record writes a valid fence record (the layout of src/fg_fence.c, with
 * its CRC) into b: what the library itself would have written for t at
 * generation gen, or what a storage holding such a record reads as.
 */
static void record(uint8_t b[FG_FENCE_RECORD_LEN], const fg_token *t, uint64_t gen)
{
    uint32_t crc;
    memset(b, 0, FG_FENCE_RECORD_LEN);
    memcpy(b, "FGF1", 4);
    put64(b + 4, gen);
    put64(b + 12, t->epoch);
    put64(b + 20, t->seq);
    put64(b + 28, (uint64_t)t->issued_at);
    b[36] = t->domain_len;
    memcpy(b + 37, t->domain, t->domain_len);
    b[165] = t->holder_len;
    memcpy(b + 166, t->holder, t->holder_len);
    crc = fg_crc32(0, b, 294);
    b[294] = (uint8_t)(crc >> 24);
    b[295] = (uint8_t)(crc >> 16);
    b[296] = (uint8_t)(crc >> 8);
    b[297] = (uint8_t)crc;
}

/* at reports whether f holds exactly t's lease. */
static int at(const fg_fence *f, const fg_token *t)
{
    return f->has_lease && f->lease.epoch == t->epoch && f->lease.seq == t->seq && f->lease.issued_at == t->issued_at &&
           strcmp(f->lease.holder, t->holder) == 0;
}

static void attack_generation_wrap(tu_counts *c)
{
    tu_mem m;
    fg_storage s;
    fg_fence f;
    fg_check o = FG_CHECK_STALE;
    fg_token l1 = tok("press-7", 1, 1, "a", 1), l2 = tok("press-7", 1, 2, "b", 2);
    fg_status st;
    tu_mem_init(&m, 0xFF, &s);
    record(m.slot[0], &l1, UINT64_MAX);
    tu_check(c, fg_fence_open(&f, "press-7", 7, &s) == FG_OK && at(&f, &l1), "wrap: the record at generation 2^64-1 loads");
    st = fg_fence_raise(&f, &l2, &o);
    /* The device acts on l2 only after FG_OK with NEWER (docs/firmware-c.md, step 6). */
    if (st == FG_OK && o == FG_CHECK_NEWER) {
        fg_check stale;
        fg_fence_open(&f, "press-7", 7, &s);
        stale = fg_fence_check(&f, &l1);
        tu_check(c, at(&f, &l2) && stale == FG_CHECK_STALE,
                 "wrap: raise to l2 said FG_OK/newer (the device acted on l2), but after a reboot the fence is %s and l1 "
                 "is %s: the fence went back one lease (I2)",
                 at(&f, &l1) ? "l1" : "not l2", fg_check_name(stale));
    } else {
        tu_check(c, 1, "wrap: the raise was refused (%s), so the device never acts on l2", fg_status_name(st));
    }
}

static void attack_shared_storage(tu_counts *c)
{
    tu_mem m;
    fg_storage s;
    fg_fence x, y;
    fg_check o;
    fg_token x1 = tok("press-7", 1, 5, "a", 1), y1 = tok("press-8", 9, 1, "z", 1);
    fg_token x_stale = tok("press-7", 1, 4, "old", 0);
    tu_mem_init(&m, 0xFF, &s);
    /* A device in two domains: both fences opened at boot on the storage. */
    fg_fence_open(&x, "press-7", 7, &s);
    fg_fence_open(&y, "press-8", 7, &s);
    tu_check(c, fg_fence_raise(&x, &x1, &o) == FG_OK && o == FG_CHECK_NEWER, "shared: press-7 raised to x1 (the device acts on it)");
    /* press-8's raise would overwrite press-7's record: it must refuse
     * (one storage per fence, docs/firmware-c.md), so press-8 never acts. */
    tu_check(c, fg_fence_raise(&y, &y1, &o) == FG_ERR_STORAGE, "shared: press-8's raise over press-7's record was not refused");
    /* Power cycle. */
    fg_fence_open(&x, "press-7", 7, &s);
    tu_check(c, at(&x, &x1) && fg_fence_check(&x, &x_stale) == FG_CHECK_STALE,
             "shared: after a reboot press-7's fence is %s and a token older than x1 is %s: press-8's raise "
             "overwrote press-7's current record (I2)",
             x.has_lease ? "another lease" : "empty", fg_check_name(fg_fence_check(&x, &x_stale)));
}

int main(void)
{
    tu_counts c = {0, 0, 0};
    attack_generation_wrap(&c);
    attack_shared_storage(&c);
    return tu_finish(&c);
}
