package fence

import "fmt"

// MaxIDLen is the longest domain, holder or device id, in bytes.
const MaxIDLen = 128

// ValidID reports whether s can be a domain, holder or device id: 1 to
// MaxIDLen bytes of [A-Za-z0-9._-].
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !idByte(s[i]) {
			return false
		}
	}
	return true
}

// CheckID returns nil if s is a valid id and otherwise an error wrapping
// ErrInvalidID that names what (e.g. "domain") and the offending value.
func CheckID(what, s string) error {
	if ValidID(s) {
		return nil
	}
	if len(s) > MaxIDLen {
		return fmt.Errorf("%w: %s is %d bytes, at most %d", ErrInvalidID, what, len(s), MaxIDLen)
	}
	return fmt.Errorf("%w: %s %q must be 1..%d of [A-Za-z0-9._-]", ErrInvalidID, what, s, MaxIDLen)
}

func idByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '.', c == '_', c == '-':
		return true
	}
	return false
}
