/*
 * fencegate.h — fencing tokens (fg1) on the device: parse, verify, order,
 * and a fence per domain that survives power failure.
 *
 * The rules are those of docs/protocol.md ("Fencing tokens (fg1)"); the Go
 * package fence is the reference implementation, and the test vectors in
 * firmware/c/testdata (written by Go) hold this library to its answers.
 *
 * Properties, for every function below:
 *   - C99, no heap allocation, no global or static mutable state: every
 *     function works only on the memory its caller passes. Functions are
 *     reentrant; an object (fg_token, fg_fence) must not be used by two
 *     threads at once.
 *   - Inputs are never read past the length given, and never need a NUL.
 *   - Buffers are fixed, sized from the protocol's limits (a wire token is at
 *     most 1024 bytes, a valid body at most 295).
 *
 * Two things come from the integrator (docs/firmware-c.md):
 *   - fg_ed25519_verify, the Ed25519 adapter (port/fg_ed25519_libsodium.c on
 *     Linux and ESP-IDF; Monocypher in the docs);
 *   - an fg_storage, where the fence is kept (port/fg_storage_file.c is an
 *     example over a POSIX file).
 */
#ifndef FENCEGATE_H
#define FENCEGATE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Limits of protocol version 1. */
#define FG_MAX_TOKEN_LEN 1024 /* longest wire form accepted, bytes */
#define FG_MAX_ID_LEN 128     /* longest domain or holder id, bytes */
#define FG_MAX_BODY_LEN 295   /* longest valid body: 39 + 128 + 128 */
#define FG_HEADER_LEN 37      /* version .. ttl_ms */
#define FG_KEY_ID_LEN 8       /* first 8 bytes of SHA-256(public key) */
#define FG_PUBLIC_KEY_LEN 32  /* raw Ed25519 public key */
#define FG_SIGNATURE_LEN 64   /* Ed25519 signature */
#define FG_SIGNED_PREFIX_LEN 19 /* "fencegate token v1" and one zero byte */
#define FG_BODY_VERSION 0x01

/*
 * fg_status is the outcome of a call. FG_OK and the reasons of
 * docs/protocol.md ("Rejection reasons"), in the same order, then the
 * library's own failures.
 */
typedef enum {
    FG_OK = 0,
    FG_ERR_OVERSIZE,        /* wire form longer than 1024 bytes */
    FG_ERR_PREFIX,          /* no "fg1." prefix, or no '.' before the signature */
    FG_ERR_BASE64,          /* a byte outside [A-Za-z0-9._-], or not strict unpadded base64url */
    FG_ERR_TRUNCATED,       /* body ends before its layout; signature shorter than 64 bytes */
    FG_ERR_TRAILING,        /* bytes after the holder; signature longer than 64 bytes */
    FG_ERR_VERSION,         /* version byte is not 0x01 */
    FG_ERR_INVALID_ID,      /* domain or holder breaks the id rules */
    FG_ERR_INVALID_FIELD,   /* epoch, seq or ttl_ms is zero */
    FG_ERR_UNKNOWN_KEY,     /* key_id not in the key ring */
    FG_ERR_SIGNATURE,       /* Ed25519 check failed */
    FG_ERR_DOMAIN_MISMATCH, /* two tokens of different domains were compared */
    FG_ERR_STORAGE,         /* the fence storage failed to read or write */
    FG_ERR_CORRUPT,         /* both fence slots hold data and neither is a valid record */
    FG_ERR_ARGUMENT         /* a NULL pointer or an id that is not valid */
} fg_status;

/*
 * fg_status_name returns the reason's name as docs/protocol.md spells it
 * with underscores ("ok", "oversize", "prefix", "base64", "truncated",
 * "trailing", "version", "invalid_id", "invalid_field", "unknown_key",
 * "signature", "domain_mismatch") or "storage", "corrupt", "argument". It
 * never returns NULL ("unknown" for a value outside the enum).
 */
const char *fg_status_name(fg_status s);

/*
 * fg_token is a decoded token. domain and holder are NUL-terminated copies
 * (ids never contain NUL) with their lengths; body is the body exactly as
 * decoded from the wire, for the signature check.
 */
typedef struct {
    uint8_t key_id[FG_KEY_ID_LEN];
    uint64_t epoch;   /* > 0 */
    uint64_t seq;     /* > 0 */
    int64_t issued_at; /* Unix ms at the controller, informational */
    uint32_t ttl_ms;  /* > 0, informational */
    uint8_t domain_len;
    uint8_t holder_len;
    char domain[FG_MAX_ID_LEN + 1];
    char holder[FG_MAX_ID_LEN + 1];
    uint16_t body_len;
    uint8_t body[FG_MAX_BODY_LEN];
    uint8_t signature[FG_SIGNATURE_LEN];
} fg_token;

/*
 * fg_token_parse decodes the wire form wire[0..len) WITHOUT checking its
 * signature, with every envelope, base64 and body rule of docs/protocol.md.
 * It returns FG_OK and fills *out, or the one reason the Go function
 * fence.ParseUnverified gives for the same bytes (checked in the order Go
 * checks them). On failure *out is unspecified. wire may be NULL only if len
 * is 0; out must not be NULL (FG_ERR_ARGUMENT).
 */
fg_status fg_token_parse(const char *wire, size_t len, fg_token *out);

/* fg_key is one trusted controller key: its id and raw public key. */
typedef struct {
    uint8_t key_id[FG_KEY_ID_LEN];
    uint8_t public_key[FG_PUBLIC_KEY_LEN];
} fg_key;

/*
 * fg_keyring is a set of trusted keys, owned by the caller (e.g. a const
 * table in flash). Removing a key is removing its entry: the library
 * caches nothing.
 */
typedef struct {
    const fg_key *keys;
    size_t count;
} fg_keyring;

/*
 * fg_token_verify parses wire[0..len) (as fg_token_parse), looks up its
 * key id in ring (FG_ERR_UNKNOWN_KEY if absent) and checks the Ed25519
 * signature over "fencegate token v1" 0x00 body (FG_ERR_SIGNATURE). FG_OK
 * means the token is authentic; its domain and position are not judged here
 * (fg_fence_check does that). Same answers as the Go KeyRing.Verify.
 */
fg_status fg_token_verify(const fg_keyring *ring, const char *wire, size_t len, fg_token *out);

/*
 * fg_ed25519_verify is the Ed25519 adapter the integrator links in: return
 * 0 if sig is a valid pure Ed25519 (RFC 8032) signature of msg[0..len)
 * under the raw public key pk, anything else otherwise. It must reject
 * non-canonical signatures (S >= group order), as libsodium's
 * crypto_sign_verify_detached and Monocypher's crypto_ed25519_check do.
 */
int fg_ed25519_verify(const uint8_t sig[FG_SIGNATURE_LEN], const uint8_t *msg, size_t len,
                      const uint8_t pk[FG_PUBLIC_KEY_LEN]);

/*
 * fg_position_compare orders (epoch1, seq1) against (epoch2, seq2): epoch
 * first, then seq, both unsigned. It returns -1 (older), 0 or +1 (newer).
 */
int fg_position_compare(uint64_t epoch1, uint64_t seq1, uint64_t epoch2, uint64_t seq2);

/*
 * fg_token_compare sets *order to fg_position_compare of a against b, or
 * returns FG_ERR_DOMAIN_MISMATCH (and leaves *order alone) when their domains
 * differ: tokens of different domains never compare.
 */
fg_status fg_token_compare(const fg_token *a, const fg_token *b, int *order);

/*
 * fg_token_same_lease returns 1 if a and b name the same lease — domain,
 * epoch, seq, holder and issued_at equal (ttl_ms and key_id are not part of
 * it) — and 0 otherwise.
 */
int fg_token_same_lease(const fg_token *a, const fg_token *b);

/*
 * fg_storage is where a fence is kept: two slots of FG_FENCE_RECORD_LEN
 * bytes each (e.g. two flash sectors, or two regions of a file). Both
 * functions return 0 on success and anything else on failure.
 *
 * read fills buf[0..len) with slot's content; a slot never written may read
 * as anything (erased flash, zeros): the record's CRC tells.
 * write stores buf[0..len) in slot and returns 0 only once the bytes are
 * durable (flash programmed, fsync done). A write cut by power failure may
 * leave the slot holding any mixture of old and new bytes — but must not
 * touch the other slot.
 */
typedef struct {
    int (*read)(void *ctx, unsigned slot, uint8_t *buf, size_t len);
    int (*write)(void *ctx, unsigned slot, const uint8_t *buf, size_t len);
    void *ctx;
} fg_storage;

/* FG_FENCE_RECORD_LEN is the size of one slot's record. */
#define FG_FENCE_RECORD_LEN 298

/*
 * fg_lease is a fence's lease: the position and lease identity of the newest
 * token the device acted on in its domain.
 */
typedef struct {
    uint64_t epoch;
    uint64_t seq;
    int64_t issued_at;
    uint8_t holder_len;
    char holder[FG_MAX_ID_LEN + 1];
} fg_lease;

/*
 * fg_fence is the fence of one domain, loaded from and written to its
 * storage. Read its fields, never write them: use fg_fence_open and
 * fg_fence_raise. has_lease is 0 while no token of the domain was raised.
 */
typedef struct {
    fg_storage storage;
    uint8_t domain_len;
    char domain[FG_MAX_ID_LEN + 1];
    int has_lease;
    fg_lease lease;
    uint64_t generation; /* largest generation of a valid record in storage; 0: none */
    unsigned next_slot;  /* the slot the next record goes to: never the one holding the lease */
} fg_fence;

/*
 * fg_fence_open loads the fence of domain (domain[0..domain_len), a valid
 * id) from storage: of the two slots, the valid record (magic, CRC, fields)
 * of this domain with the larger generation wins. With no valid record the
 * fence is empty (has_lease 0) if both slots are blank or one holds a torn
 * write; FG_ERR_CORRUPT if both hold something and neither is valid;
 * FG_ERR_STORAGE if a read failed. The storage is copied into f.
 */
fg_status fg_fence_open(fg_fence *f, const char *domain, size_t domain_len, const fg_storage *storage);

/* The answer of fg_fence_check: how a token stands against the fence. */
typedef enum {
    FG_CHECK_NEWER = 1,     /* newer position (or an empty fence): accept and raise */
    FG_CHECK_SAME_LEASE,    /* the fence's lease: accept */
    FG_CHECK_STALE,         /* older position: reject (stale_token) */
    FG_CHECK_CONFLICT,      /* the fence's position, another lease: reject (forgery or controller bug) */
    FG_CHECK_WRONG_DOMAIN   /* another domain: reject, compare nothing */
} fg_check;

/* fg_check_name returns "newer", "same_lease", "stale", "conflict" or
 * "wrong_domain" ("unknown" otherwise). */
const char *fg_check_name(fg_check c);

/*
 * fg_fence_check tells how the (verified) token t stands against f. It
 * changes nothing.
 */
fg_check fg_fence_check(const fg_fence *f, const fg_token *t);

/*
 * fg_fence_raise checks t like fg_fence_check and sets *outcome. Only for
 * FG_CHECK_NEWER does it write: the next record to the slot that does not
 * hold the newest one, and returns FG_OK once storage says it is durable;
 * only then is f updated. It returns FG_ERR_STORAGE, f unchanged, if the
 * write fails, if that slot holds another domain's valid record (one
 * storage per fence: it is never overwritten) or if the generation counter
 * is exhausted: the caller must not act on t. Act on a token only after
 * fg_fence_raise returned FG_OK with NEWER or SAME_LEASE.
 */
fg_status fg_fence_raise(fg_fence *f, const fg_token *t, fg_check *outcome);

/*
 * fg_id_valid returns 1 if s[0..len) is a valid id — 1 to 128 bytes of
 * [A-Za-z0-9._-] — and 0 otherwise.
 */
int fg_id_valid(const char *s, size_t len);

/*
 * fg_crc32 is CRC-32/ISO-HDLC (the zlib CRC) of buf[0..len), continuing
 * from crc (start with 0). The fence records use it.
 */
uint32_t fg_crc32(uint32_t crc, const uint8_t *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* FENCEGATE_H */
