package persist

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
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

// A fence remembered when it is encoded (the raise path) is what decoding
// its bytes gives: the raise time cut to milliseconds and without a
// monotonic reading, the token as verified from its wire form. A token
// without a wire form is not remembered, so its read still fails.
func TestEncodeFenceRemembersDecodedForm(t *testing.T) {
	s := testSigner(t)
	ring, err := fence.NewKeyRing(0, s.Public())
	if err != nil {
		t.Fatal(err)
	}
	verified, err := ring.Verify(mustToken(t, s, "plant", 3, 7, "b").Raw)
	if err != nil {
		t.Fatal(err)
	}
	f := Fence{Token: verified, RaisedAt: time.Now()}
	b, err := encodeFence(f)
	if err != nil {
		t.Fatal(err)
	}
	fenceMemo.Lock()
	memo, ok := fenceMemo.m[string(b)]
	fenceMemo.Unlock()
	want, perr := parseFence("d1", b)
	if !ok || perr != nil || memo != want {
		t.Fatalf("memo after encode %+v (present %v); parse gives %+v, %v", memo, ok, want, perr)
	}
	noWire := Fence{Token: fence.Token{Domain: "plant", Epoch: 1, Seq: 1, Holder: "a", TTLms: 1}, RaisedAt: time.UnixMilli(5)}
	b, err = encodeFence(noWire)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeFence("d1", b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("fence without a wire form: err %v, want ErrCorrupt", err)
	}
}
