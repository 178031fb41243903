package frame

import (
	"bytes"
	"testing"
)

// FuzzParseReply: any payload is parsed or refused without panicking, and
// what parses marshals back to the same bytes (the layout is canonical).
func FuzzParseReply(f *testing.F) {
	good, _ := Reply{ID: "c1", Status: StatusApplied, Body: []byte(`{"value":1}`)}.Marshal()
	f.Add(good)
	f.Add(good[:7])
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := ParseReply(in)
		if err != nil {
			return
		}
		out, err := r.Marshal()
		if err != nil && len(in) <= MaxPayload {
			t.Fatalf("parsed reply does not marshal: %v", err)
		}
		if err == nil && !bytes.Equal(out, in) {
			t.Fatalf("round trip % x → % x", in, out)
		}
	})
}

// FuzzParseRequest: as FuzzParseReply, for the firmware's side.
func FuzzParseRequest(f *testing.F) {
	good, _ := Request{ID: "c1", Domain: "d", Epoch: 1, Seq: 2, Holder: "h", Op: "set", Args: []byte(`{"value":1}`)}.Marshal()
	f.Add(good)
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := ParseRequest(in)
		if err != nil {
			return
		}
		if out, err := r.Marshal(); err == nil && !bytes.Equal(out, in) {
			t.Fatalf("round trip % x → % x", in, out)
		}
	})
}
