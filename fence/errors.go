package fence

import "errors"

// Errors returned when a token cannot be decoded, verified or compared. Each
// names one reason so callers can report it precisely; test with errors.Is.
var (
	// ErrOversize: the wire form is longer than MaxTokenLen bytes.
	ErrOversize = errors.New("fence: token too long")
	// ErrPrefix: the wire form does not start with "fg1." or lacks the
	// separator between body and signature.
	ErrPrefix = errors.New("fence: not a fg1 token")
	// ErrBase64: a part is not unpadded base64url.
	ErrBase64 = errors.New("fence: bad base64")
	// ErrTruncated: the body or signature ends before its layout does.
	ErrTruncated = errors.New("fence: truncated token")
	// ErrTrailing: the body or signature has bytes after its layout ends.
	ErrTrailing = errors.New("fence: trailing bytes in token")
	// ErrVersion: the body's version byte is not one this package knows.
	ErrVersion = errors.New("fence: unknown token version")
	// ErrInvalidID: a domain or holder is empty, longer than MaxIDLen or uses
	// characters outside [A-Za-z0-9._-].
	ErrInvalidID = errors.New("fence: invalid id")
	// ErrInvalidField: epoch, seq or ttl is zero.
	ErrInvalidField = errors.New("fence: invalid field")
	// ErrUnknownKey: the token's key id is not in the key ring.
	ErrUnknownKey = errors.New("fence: unknown key id")
	// ErrSignature: the signature does not verify under the named key.
	ErrSignature = errors.New("fence: bad signature")
	// ErrDomainMismatch: two tokens of different domains were compared.
	ErrDomainMismatch = errors.New("fence: tokens of different domains")
	// ErrKeyFile: a key file is not the PEM block expected.
	ErrKeyFile = errors.New("fence: bad key file")
)
