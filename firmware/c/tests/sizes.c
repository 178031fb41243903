/*
 * sizes.c — compiled (not run) by sizes.sh for the target: each array is
 * as large as a type the caller must provide memory for, so the symbol
 * sizes (nm -S) are the RAM a firmware reserves for them.
 */
#include "fencegate.h"

unsigned char size_fg_token[sizeof(fg_token)];
unsigned char size_fg_fence[sizeof(fg_fence)];
unsigned char size_fg_key[sizeof(fg_key)];
unsigned char size_fg_fence_record[FG_FENCE_RECORD_LEN];
