/*
 * fg_verify.c — signature check against a key ring, and the order of
 * positions (docs/protocol.md, "Signature", "Key ids", "Ordering").
 */
#include "fencegate.h"

#include <string.h>

static const uint8_t signed_prefix[FG_SIGNED_PREFIX_LEN] = {
    'f', 'e', 'n', 'c', 'e', 'g', 'a', 't', 'e', ' ', 't', 'o', 'k', 'e', 'n', ' ', 'v', '1', 0};

/* find_key returns the ring's key with id, or NULL. */
static const fg_key *find_key(const fg_keyring *ring, const uint8_t id[FG_KEY_ID_LEN])
{
    size_t i;
    for (i = 0; i < ring->count; i++) {
        if (memcmp(ring->keys[i].key_id, id, FG_KEY_ID_LEN) == 0) {
            return &ring->keys[i];
        }
    }
    return NULL;
}

fg_status fg_token_verify(const fg_keyring *ring, const char *wire, size_t len, fg_token *out)
{
    uint8_t msg[FG_SIGNED_PREFIX_LEN + FG_MAX_BODY_LEN];
    const fg_key *key;
    fg_status st;
    if (ring == NULL || (ring->keys == NULL && ring->count != 0)) {
        return FG_ERR_ARGUMENT;
    }
    if ((st = fg_token_parse(wire, len, out)) != FG_OK) {
        return st;
    }
    if ((key = find_key(ring, out->key_id)) == NULL) {
        return FG_ERR_UNKNOWN_KEY;
    }
    memcpy(msg, signed_prefix, FG_SIGNED_PREFIX_LEN);
    memcpy(msg + FG_SIGNED_PREFIX_LEN, out->body, out->body_len);
    if (fg_ed25519_verify(out->signature, msg, FG_SIGNED_PREFIX_LEN + (size_t)out->body_len, key->public_key) != 0) {
        return FG_ERR_SIGNATURE;
    }
    return FG_OK;
}

int fg_position_compare(uint64_t epoch1, uint64_t seq1, uint64_t epoch2, uint64_t seq2)
{
    if (epoch1 != epoch2) {
        return epoch1 < epoch2 ? -1 : 1;
    }
    if (seq1 != seq2) {
        return seq1 < seq2 ? -1 : 1;
    }
    return 0;
}

/* same_domain compares the domains; a length over FG_MAX_ID_LEN (a token
 * built by hand) never matches, so no copy is read past its end. */
static int same_domain(const fg_token *a, const fg_token *b)
{
    return a->domain_len == b->domain_len && a->domain_len <= FG_MAX_ID_LEN &&
           memcmp(a->domain, b->domain, a->domain_len) == 0;
}

fg_status fg_token_compare(const fg_token *a, const fg_token *b, int *order)
{
    if (a == NULL || b == NULL || order == NULL) {
        return FG_ERR_ARGUMENT;
    }
    if (!same_domain(a, b)) {
        return FG_ERR_DOMAIN_MISMATCH;
    }
    *order = fg_position_compare(a->epoch, a->seq, b->epoch, b->seq);
    return FG_OK;
}

int fg_token_same_lease(const fg_token *a, const fg_token *b)
{
    return same_domain(a, b) && a->epoch == b->epoch && a->seq == b->seq && a->issued_at == b->issued_at &&
           a->holder_len == b->holder_len && a->holder_len <= FG_MAX_ID_LEN &&
           memcmp(a->holder, b->holder, a->holder_len) == 0;
}
