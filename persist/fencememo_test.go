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
		b, err := encodeFence(deviceSlot("d1"), f)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second read comes from the memo
			got, err := decodeFence(deviceSlot("d1"), b)
			want, perr := parseFence("d1", b)
			if err != nil || perr != nil || got != want || got.Token.Seq != uint64(i+1) || !got.RaisedAt.Equal(f.RaisedAt) {
				t.Fatalf("read %d: got %+v, %v; parse gives %+v, %v", i, got, err, want, perr)
			}
		}
	}
	bad := []byte(`{"token":"fg1.garbage","raised_at":1}`)
	for range 2 {
		if _, err := decodeFence(deviceSlot("d1"), bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("corrupt fence: err %v, want ErrCorrupt", err)
		}
	}
	raw := mustToken(t, s, "plant", 1, 1, "a").Raw
	for i := range fenceMemoMax + 10 { // a slot each: one entry per slot
		b := []byte(fmt.Sprintf(`{"token":%q,"raised_at":%d}`, raw, i))
		if _, err := decodeFence(deviceSlot(fmt.Sprint("d", i)), b); err != nil {
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
	b, err := encodeFence(domainSlot("plant"), f)
	if err != nil {
		t.Fatal(err)
	}
	fenceMemo.Lock()
	memo, ok := fenceMemo.m[domainSlot("plant")]
	fenceMemo.Unlock()
	want, perr := parseFence("d1", b)
	if !ok || perr != nil || memo.f != want || memo.stored != string(b) {
		t.Fatalf("memo after encode %+v (present %v); parse gives %+v, %v", memo, ok, want, perr)
	}
	noWire := Fence{Token: fence.Token{Domain: "plant", Epoch: 1, Seq: 1, Holder: "a", TTLms: 1}, RaisedAt: time.UnixMilli(5)}
	b, err = encodeFence(deviceSlot("d2"), noWire)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeFence(deviceSlot("d2"), b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("fence without a wire form: err %v, want ErrCorrupt", err)
	}
}

// The memo keeps one entry per slot: raising a fence replaces its slot's
// entry (dead fences do not pile up until the bound), a device and a
// domain of the same name keep an entry each, and reading bytes other than
// the slot's last ones decodes them (and answers them, not the entry).
func TestFenceMemoKeepsOneEntryPerSlot(t *testing.T) {
	fenceMemo.Lock()
	clear(fenceMemo.m)
	fenceMemo.Unlock()
	s := testSigner(t)
	stored := map[fenceSlot][]byte{}
	for seq := range uint64(50) {
		for i, slot := range []fenceSlot{deviceSlot("x"), domainSlot("x")} {
			// the two slots' bytes differ (raise times), so an entry shared
			// by both would hold one of them only
			b, err := encodeFence(slot, Fence{Token: mustToken(t, s, "x", 1, seq+1, "a"), RaisedAt: time.UnixMilli(int64(2*seq) + int64(i))})
			if err != nil {
				t.Fatal(err)
			}
			stored[slot] = b
		}
	}
	entry := func(slot fenceSlot) memoFence {
		fenceMemo.Lock()
		defer fenceMemo.Unlock()
		return fenceMemo.m[slot]
	}
	fenceMemo.Lock()
	n := len(fenceMemo.m)
	fenceMemo.Unlock()
	dev, dom := entry(deviceSlot("x")), entry(domainSlot("x"))
	if n != 2 || dev.f.Token.Seq != 50 || dom.f.Token.Seq != 50 ||
		dev.stored != string(stored[deviceSlot("x")]) || dom.stored != string(stored[domainSlot("x")]) {
		t.Fatalf("after 50 raises of a device and a domain: %d entries, seqs %d/%d", n, dev.f.Token.Seq, dom.f.Token.Seq)
	}
	older := []byte(fmt.Sprintf(`{"token":%q,"raised_at":7}`, mustToken(t, s, "x", 1, 3, "a").Raw))
	got, err := decodeFence(domainSlot("x"), older)
	if err != nil || got.Token.Seq != 3 || got.RaisedAt.UnixMilli() != 7 {
		t.Fatalf("older bytes in a remembered slot: %+v, %v; want seq 3 raised at 7", got, err)
	}
	if dom := entry(domainSlot("x")); dom.stored != string(older) || dom.f.Token.Seq != 3 {
		t.Fatalf("the domain's entry after reading older bytes: seq %d, want 3 (the bytes last read)", dom.f.Token.Seq)
	}
	if dev := entry(deviceSlot("x")); dev.stored != string(stored[deviceSlot("x")]) || dev.f.Token.Seq != 50 {
		t.Fatalf("the device's entry after its domain namesake was read: seq %d, want 50 (untouched)", dev.f.Token.Seq)
	}
}
