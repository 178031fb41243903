/*
 * fg_ed25519_monocypher.c — the Ed25519 adapter over Monocypher 4
 * (monocypher.c and optional/monocypher-ed25519.c, which the integrator
 * adds to the firmware). crypto_ed25519_check is pure Ed25519 with SHA-512
 * and rejects S >= L; Monocypher's plain crypto_eddsa_check hashes with
 * BLAKE2b and does NOT verify fencegate tokens. Needs no init and no heap.
 *
 * CI builds the Linux port (libsodium); this file is built and run against
 * testdata/ by hand as docs/firmware-c.md describes.
 */
#include "fencegate.h"

#include "monocypher-ed25519.h"

int fg_ed25519_verify(const uint8_t sig[FG_SIGNATURE_LEN], const uint8_t *msg, size_t len,
                      const uint8_t pk[FG_PUBLIC_KEY_LEN])
{
    return crypto_ed25519_check(sig, pk, msg, len) == 0 ? 0 : -1;
}
