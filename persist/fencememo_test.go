package persist

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// decodeFence answers from its memo exactly what parsing the bytes
// answers, never remembers a failure, and stays within its bound.
func TestDecodeFenceMemo(t *testing.T) {
	s := testSigner(t)
	for i := range 3 {
		f := Fence{Token: mustToken(t, s, "plant", 1, uint64(i+1), "a"), RaisedAt: time.UnixMilli(int64(1000 + i))}
		b, err := encodeFence(f)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second read comes from the memo
			got, err := decodeFence("d1", b)
			want, perr := parseFence("d1", b)
			if err != nil || perr != nil || got != want || got.Token.Seq != uint64(i+1) || !got.RaisedAt.Equal(f.RaisedAt) {
				t.Fatalf("read %d: got %+v, %v; parse gives %+v, %v", i, got, err, want, perr)
			}
		}
	}
	bad := []byte(`{"token":"fg1.garbage","raised_at":1}`)
	for range 2 {
		if _, err := decodeFence("d1", bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("corrupt fence: err %v, want ErrCorrupt", err)
		}
	}
	for i := range fenceMemoMax + 10 {
		b := []byte(fmt.Sprintf(`{"token":%q,"raised_at":%d}`, mustToken(t, s, "plant", 1, 1, "a").Raw, i))
		if _, err := decodeFence("d1", b); err != nil {
			t.Fatal(err)
		}
	}
	fenceMemo.Lock()
	n := len(fenceMemo.m)
	fenceMemo.Unlock()
	if n > fenceMemoMax {
		t.Fatalf("memo holds %d fences, bound %d", n, fenceMemoMax)
	}
}
