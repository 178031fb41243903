/*
 * testutil.h — helpers shared by the C test programs: hex, the key ring of
 * testdata/tokens.txt, an in-memory fence storage that can fail or tear
 * writes, and pass/fail counting ending in "N passed, N failed".
 */
#ifndef FG_TESTUTIL_H
#define FG_TESTUTIL_H

#include "fencegate.h"

#include <stdio.h>

#define TU_MAX_KEYS 8

/* tu_counts counts checks; tu_check records one. */
typedef struct {
    long passed;
    long failed;
    long shown; /* failures printed so far (at most 30 are) */
} tu_counts;

/* tu_check counts ok as a pass or a failure, printing the first failures
 * with the printf-style message. Returns ok. */
int tu_check(tu_counts *c, int ok, const char *fmt, ...);

/* tu_finish prints "N passed, N failed" and returns the exit status. */
int tu_finish(const tu_counts *c);

/* tu_unhex decodes hex into out (at most cap bytes); "-" is empty. Returns
 * the length, or -1 if hex is not even-length hex or too long. */
long tu_unhex(const char *hex, uint8_t *out, size_t cap);

/* tu_load_ring reads the "key" lines of tokens.txt at path. */
int tu_load_ring(const char *path, fg_key keys[TU_MAX_KEYS], fg_keyring *ring);

/* tu_mem is an in-memory pair of slots. Writes can be made to fail
 * (fail_writes > 0: the next n writes fail without touching the slot) or
 * to tear (tear_at >= 0: the next write stores only its first tear_at bytes,
 * leaving the rest of the slot as it was, then reports failure, as a power
 * cut would). */
typedef struct {
    uint8_t slot[2][FG_FENCE_RECORD_LEN];
    int fail_writes;
    long tear_at;
    int fail_reads;
    long writes;
} tu_mem;

/* tu_mem_init blanks both slots (all fill) and sets *storage to m. */
void tu_mem_init(tu_mem *m, uint8_t fill, fg_storage *storage);

/* tu_open opens dir/name for reading, failing the test loudly if absent. */
FILE *tu_open(const char *dir, const char *name);

#endif
