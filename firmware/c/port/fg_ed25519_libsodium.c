/*
 * fg_ed25519_libsodium.c — the Ed25519 adapter over libsodium (Debian's
 * libsodium-dev; ESP-IDF's libsodium component is the same library).
 *
 * crypto_sign_verify_detached is pure Ed25519 and rejects non-canonical
 * signatures (S >= L), as docs/protocol.md requires. sodium_init is
 * idempotent and thread-safe; calling it here keeps the adapter free of
 * any init step the integrator could forget.
 */
#include "fencegate.h"

#include <sodium.h>

int fg_ed25519_verify(const uint8_t sig[FG_SIGNATURE_LEN], const uint8_t *msg, size_t len,
                      const uint8_t pk[FG_PUBLIC_KEY_LEN])
{
    if (sodium_init() < 0) {
        return -1;
    }
    return crypto_sign_verify_detached(sig, msg, (unsigned long long)len, pk) == 0 ? 0 : -1;
}
