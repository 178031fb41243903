package serial

import "fmt"

// COBSEncode appends the COBS encoding of src to dst and returns it. The
// encoding contains no zero byte; it is 1 + len(src) + len(src)/254 bytes
// at most. After a full block of 254 non-zero bytes at the end of src an
// empty block (0x01) follows, as in the reference encoder.
func COBSEncode(dst, src []byte) []byte {
	codeAt := len(dst)
	dst = append(dst, 0)
	code := byte(1)
	for _, b := range src {
		if b != 0 {
			dst = append(dst, b)
			code++
		}
		if b == 0 || code == 0xFF {
			dst[codeAt] = code
			codeAt = len(dst)
			dst = append(dst, 0)
			code = 1
		}
	}
	dst[codeAt] = code
	return dst
}

// COBSDecode decodes one COBS-encoded block sequence (without the 0x00
// delimiter). It fails on a zero byte or a block running past the end.
func COBSDecode(src []byte) ([]byte, error) {
	out := make([]byte, 0, len(src))
	for i := 0; i < len(src); {
		code := int(src[i])
		if code == 0 {
			return nil, fmt.Errorf("%w: zero byte at %d in COBS data", ErrBadFrame, i)
		}
		end := i + code
		if end > len(src) {
			return nil, fmt.Errorf("%w: COBS block at %d runs past the end", ErrBadFrame, i)
		}
		for j := i + 1; j < end; j++ {
			if src[j] == 0 {
				return nil, fmt.Errorf("%w: zero byte at %d in COBS data", ErrBadFrame, j)
			}
		}
		out = append(out, src[i+1:end]...)
		i = end
		if code != 0xFF && i < len(src) {
			out = append(out, 0)
		}
	}
	return out, nil
}
