/*
 * fg_fence.c — a domain's fence, kept power-fail safe in two slots.
 *
 * A record (FG_FENCE_RECORD_LEN bytes, big-endian):
 *
 *   0    4  magic "FGF1"
 *   4    8  generation, > 0; each write takes the largest one seen + 1
 *  12    8  epoch
 *  20    8  seq
 *  28    8  issued_at (two's complement)
 *  36    1  domain length, then 128 bytes of domain, zero padded
 * 165    1  holder length, then 128 bytes of holder, zero padded
 * 294    4  CRC-32 of bytes 0..293
 *
 * A new record always goes to the slot that does not hold the fence's
 * current record, so a write cut by power failure can only spoil a slot
 * whose content the device never acted on; at boot the valid record of the
 * domain with the larger generation wins.
 */
#include "fencegate.h"

#include <string.h>

#define MAGIC "FGF1"
#define OFF_GEN 4
#define OFF_EPOCH 12
#define OFF_SEQ 20
#define OFF_ISSUED 28
#define OFF_DOMAIN 36
#define OFF_HOLDER 165
#define OFF_CRC 294

uint32_t fg_crc32(uint32_t crc, const uint8_t *buf, size_t len)
{
    size_t i;
    int k;
    crc = ~crc;
    for (i = 0; i < len; i++) {
        crc ^= buf[i];
        for (k = 0; k < 8; k++) {
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
        }
    }
    return ~crc;
}

const char *fg_check_name(fg_check c)
{
    switch (c) {
    case FG_CHECK_NEWER: return "newer";
    case FG_CHECK_SAME_LEASE: return "same_lease";
    case FG_CHECK_STALE: return "stale";
    case FG_CHECK_CONFLICT: return "conflict";
    case FG_CHECK_WRONG_DOMAIN: return "wrong_domain";
    }
    return "unknown";
}

static void put64(uint8_t *p, uint64_t v)
{
    int i;
    for (i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    int i;
    for (i = 0; i < 8; i++) {
        v = (v << 8) | p[i];
    }
    return v;
}

static uint64_t from_int64(int64_t v)
{
    return v >= 0 ? (uint64_t)v : ~(uint64_t)(-(v + 1));
}

static int64_t to_int64(uint64_t u)
{
    return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}

/* record is a decoded slot; ours tells whether it is of the fence's domain. */
typedef struct {
    uint64_t generation;
    int ours;
    fg_lease lease;
} record;

static void encode(uint8_t *b, const fg_fence *f, const fg_lease *l, uint64_t generation)
{
    memset(b, 0, FG_FENCE_RECORD_LEN);
    memcpy(b, MAGIC, 4);
    put64(b + OFF_GEN, generation);
    put64(b + OFF_EPOCH, l->epoch);
    put64(b + OFF_SEQ, l->seq);
    put64(b + OFF_ISSUED, from_int64(l->issued_at));
    b[OFF_DOMAIN] = f->domain_len;
    memcpy(b + OFF_DOMAIN + 1, f->domain, f->domain_len);
    b[OFF_HOLDER] = l->holder_len;
    memcpy(b + OFF_HOLDER + 1, l->holder, l->holder_len);
    {
        uint32_t crc = fg_crc32(0, b, OFF_CRC);
        b[OFF_CRC] = (uint8_t)(crc >> 24);
        b[OFF_CRC + 1] = (uint8_t)(crc >> 16);
        b[OFF_CRC + 2] = (uint8_t)(crc >> 8);
        b[OFF_CRC + 3] = (uint8_t)crc;
    }
}

/* decode returns 1 and fills r if b is a valid record (of any domain),
 * else 0. */
static int decode(const uint8_t *b, const fg_fence *f, record *r)
{
    uint8_t domain_len = b[OFF_DOMAIN];
    uint32_t crc = fg_crc32(0, b, OFF_CRC);
    uint32_t want = (uint32_t)b[OFF_CRC] << 24 | (uint32_t)b[OFF_CRC + 1] << 16 |
                    (uint32_t)b[OFF_CRC + 2] << 8 | (uint32_t)b[OFF_CRC + 3];
    if (memcmp(b, MAGIC, 4) != 0 || crc != want) {
        return 0;
    }
    r->generation = get64(b + OFF_GEN);
    r->lease.epoch = get64(b + OFF_EPOCH);
    r->lease.seq = get64(b + OFF_SEQ);
    r->lease.issued_at = to_int64(get64(b + OFF_ISSUED));
    r->lease.holder_len = b[OFF_HOLDER];
    if (r->generation == 0 || r->lease.epoch == 0 || r->lease.seq == 0 ||
        !fg_id_valid((const char *)b + OFF_DOMAIN + 1, domain_len) ||
        !fg_id_valid((const char *)b + OFF_HOLDER + 1, r->lease.holder_len)) {
        return 0;
    }
    r->ours = domain_len == f->domain_len && memcmp(b + OFF_DOMAIN + 1, f->domain, domain_len) == 0;
    memcpy(r->lease.holder, b + OFF_HOLDER + 1, r->lease.holder_len);
    r->lease.holder[r->lease.holder_len] = '\0';
    return 1;
}

/* blank reports a slot that was never written: all 0x00 or all 0xFF. */
static int blank(const uint8_t *b)
{
    size_t i;
    for (i = 1; i < FG_FENCE_RECORD_LEN; i++) {
        if (b[i] != b[0]) {
            return 0;
        }
    }
    return b[0] == 0x00 || b[0] == 0xFF;
}

/* slot_state is what one slot holds. */
typedef struct {
    int valid; /* a valid record, of any domain */
    int ours;  /* valid and of the fence's domain */
    int blank;
    record rec;
} slot_state;

static fg_status load_slot(fg_fence *f, unsigned slot, slot_state *s)
{
    uint8_t buf[FG_FENCE_RECORD_LEN];
    if (f->storage.read(f->storage.ctx, slot, buf, sizeof buf) != 0) {
        return FG_ERR_STORAGE;
    }
    s->valid = decode(buf, f, &s->rec);
    s->ours = s->valid && s->rec.ours;
    s->blank = !s->valid && blank(buf);
    return FG_OK;
}

/* adopt sets f from the two slots' states. */
static fg_status adopt(fg_fence *f, const slot_state s[2])
{
    unsigned newest; /* the slot of the newest valid record, if any */
    if (!s[0].valid && !s[1].valid && !s[0].blank && !s[1].blank) {
        return FG_ERR_CORRUPT;
    }
    newest = (s[1].valid && (!s[0].valid || s[1].rec.generation > s[0].rec.generation)) ? 1u : 0u;
    f->generation = s[newest].valid ? s[newest].rec.generation : 0;
    f->next_slot = s[newest].valid ? 1u - newest : 0u;
    if (s[0].ours || s[1].ours) {
        unsigned mine = (s[1].ours && (!s[0].ours || s[1].rec.generation > s[0].rec.generation)) ? 1u : 0u;
        f->has_lease = 1;
        f->lease = s[mine].rec.lease;
        f->next_slot = 1u - mine;
    }
    return FG_OK;
}

fg_status fg_fence_open(fg_fence *f, const char *domain, size_t domain_len, const fg_storage *storage)
{
    slot_state s[2];
    fg_storage st_copy;
    char name[FG_MAX_ID_LEN];
    fg_status st;
    if (f == NULL || storage == NULL || storage->read == NULL || storage->write == NULL ||
        !fg_id_valid(domain, domain_len)) {
        return FG_ERR_ARGUMENT;
    }
    /* domain and storage may point into *f (reopening a fence): copy first. */
    memcpy(name, domain, domain_len);
    st_copy = *storage;
    memset(f, 0, sizeof *f);
    f->storage = st_copy;
    f->domain_len = (uint8_t)domain_len;
    memcpy(f->domain, name, domain_len);
    f->domain[domain_len] = '\0';
    if ((st = load_slot(f, 0, &s[0])) != FG_OK || (st = load_slot(f, 1, &s[1])) != FG_OK) {
        return st;
    }
    return adopt(f, s);
}

fg_check fg_fence_check(const fg_fence *f, const fg_token *t)
{
    int order;
    if (t->domain_len != f->domain_len || memcmp(t->domain, f->domain, f->domain_len) != 0) {
        return FG_CHECK_WRONG_DOMAIN;
    }
    if (!f->has_lease) {
        return FG_CHECK_NEWER;
    }
    order = fg_position_compare(t->epoch, t->seq, f->lease.epoch, f->lease.seq);
    if (order < 0) {
        return FG_CHECK_STALE;
    }
    if (order > 0) {
        return FG_CHECK_NEWER;
    }
    if (t->issued_at == f->lease.issued_at && t->holder_len == f->lease.holder_len &&
        memcmp(t->holder, f->lease.holder, t->holder_len) == 0) {
        return FG_CHECK_SAME_LEASE;
    }
    return FG_CHECK_CONFLICT;
}

/* holds_other_domain reports whether slot holds a valid record of another
 * domain (a read error counts as no). */
static int holds_other_domain(const fg_fence *f, unsigned slot)
{
    uint8_t b[FG_FENCE_RECORD_LEN];
    record r;
    if (f->storage.read(f->storage.ctx, slot, b, sizeof b) != 0) {
        return 0;
    }
    return decode(b, f, &r) && !r.ours;
}

fg_status fg_fence_raise(fg_fence *f, const fg_token *t, fg_check *outcome)
{
    uint8_t buf[FG_FENCE_RECORD_LEN];
    fg_lease l;
    if (f == NULL || t == NULL || outcome == NULL || !fg_id_valid(t->holder, t->holder_len) ||
        t->epoch == 0 || t->seq == 0) {
        return FG_ERR_ARGUMENT;
    }
    *outcome = fg_fence_check(f, t);
    if (*outcome != FG_CHECK_NEWER) {
        return FG_OK;
    }
    l.epoch = t->epoch;
    l.seq = t->seq;
    l.issued_at = t->issued_at;
    l.holder_len = t->holder_len;
    memcpy(l.holder, t->holder, t->holder_len);
    l.holder[t->holder_len] = '\0';
    if (f->generation == UINT64_MAX) {
        /* The next generation would wrap to 0, which no boot takes as a
         * record: refuse rather than raise a fence that is gone at the
         * next boot. */
        return FG_ERR_STORAGE;
    }
    if (holds_other_domain(f, f->next_slot)) {
        /* The storage is shared with another domain's fence: writing would
         * destroy that domain's current record. One storage per fence. */
        return FG_ERR_STORAGE;
    }
    encode(buf, f, &l, f->generation + 1);
    if (f->storage.write(f->storage.ctx, f->next_slot, buf, sizeof buf) != 0) {
        return FG_ERR_STORAGE;
    }
    f->generation++;
    f->next_slot = 1u - f->next_slot;
    f->has_lease = 1;
    f->lease = l;
    return FG_OK;
}
