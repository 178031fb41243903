#include "testutil.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int tu_check(tu_counts *c, int ok, const char *fmt, ...)
{
    va_list ap;
    if (ok) {
        c->passed++;
        return 1;
    }
    c->failed++;
    if (c->shown++ < 30) {
        fputs("FAIL: ", stdout);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        fputc('\n', stdout);
    }
    return 0;
}

int tu_finish(const tu_counts *c)
{
    printf("%ld passed, %ld failed\n", c->passed, c->failed);
    return c->failed == 0 && c->passed > 0 ? 0 : 1;
}

static int nibble(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

long tu_unhex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = strlen(hex), i;
    if (strcmp(hex, "-") == 0) {
        return 0;
    }
    if (n % 2 != 0 || n / 2 > cap) {
        return -1;
    }
    for (i = 0; i < n / 2; i++) {
        int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return -1;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return (long)(n / 2);
}

FILE *tu_open(const char *dir, const char *name)
{
    char path[4096];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if ((f = fopen(path, "r")) == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    return f;
}

int tu_load_ring(const char *path, fg_key keys[TU_MAX_KEYS], fg_keyring *ring)
{
    char line[8192], id[64], pk[128];
    FILE *f = fopen(path, "r");
    size_t n = 0;
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        if (sscanf(line, "key %63s %127s", id, pk) != 2) {
            continue;
        }
        if (n == TU_MAX_KEYS || tu_unhex(id, keys[n].key_id, FG_KEY_ID_LEN) != FG_KEY_ID_LEN ||
            tu_unhex(pk, keys[n].public_key, FG_PUBLIC_KEY_LEN) != FG_PUBLIC_KEY_LEN) {
            fclose(f);
            return -1;
        }
        n++;
    }
    fclose(f);
    ring->keys = keys;
    ring->count = n;
    return n > 0 ? 0 : -1;
}

static int mem_read(void *ctx, unsigned slot, uint8_t *buf, size_t len)
{
    tu_mem *m = ctx;
    if (m->fail_reads > 0) {
        m->fail_reads--;
        return -1;
    }
    if (slot > 1 || len != FG_FENCE_RECORD_LEN) {
        return -1;
    }
    memcpy(buf, m->slot[slot], len);
    return 0;
}

static int mem_write(void *ctx, unsigned slot, const uint8_t *buf, size_t len)
{
    tu_mem *m = ctx;
    if (slot > 1 || len != FG_FENCE_RECORD_LEN) {
        return -1;
    }
    m->writes++;
    if (m->fail_writes > 0) {
        m->fail_writes--;
        return -1;
    }
    if (m->tear_at >= 0) {
        memcpy(m->slot[slot], buf, (size_t)m->tear_at);
        m->tear_at = -1;
        return -1;
    }
    memcpy(m->slot[slot], buf, len);
    return 0;
}

void tu_mem_init(tu_mem *m, uint8_t fill, fg_storage *storage)
{
    memset(m, 0, sizeof *m);
    memset(m->slot, fill, sizeof m->slot);
    m->tear_at = -1;
    storage->read = mem_read;
    storage->write = mem_write;
    storage->ctx = m;
}
