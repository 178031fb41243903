package frame

import (
	"bytes"
	"errors"
	"testing"
)

// TestRequestVector pins the byte layout documented in
// docs/firmware-protocol.md.
func TestRequestVector(t *testing.T) {
	req := Request{ID: "c1", Domain: "d", Epoch: 2, Seq: 0x0102, Holder: "h", Op: "get", Args: []byte("{}")}
	want := []byte{
		0x01, 0x01, // version, type command
		0x02, 'c', '1', // id
		0x01, 'd', // domain
		0, 0, 0, 0, 0, 0, 0, 2, // epoch
		0, 0, 0, 0, 0, 0, 1, 2, // seq
		0x01, 'h', // holder
		0x03, 'g', 'e', 't', // op
		0x00, 0x02, '{', '}', // args
	}
	got, err := req.Marshal()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Marshal = % x, %v\nwant      % x", got, err, want)
	}
	back, err := ParseRequest(got)
	if err != nil || back.ID != "c1" || back.Seq != 0x0102 || string(back.Args) != "{}" {
		t.Fatalf("ParseRequest = %+v, %v", back, err)
	}
}

func TestReplyVector(t *testing.T) {
	rep := Reply{ID: "c1", Status: StatusStale, Epoch: 3, Seq: 9, Holder: "h"}
	want := []byte{0x01, 0x81, 0x02, 'c', '1', 0x02, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 9, 0x01, 'h', 0, 0}
	got, err := rep.Marshal()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Marshal = % x, %v\nwant      % x", got, err, want)
	}
}

func TestParseRejects(t *testing.T) {
	good, _ := Reply{ID: "c1", Status: StatusApplied, Body: []byte(`{"a":1}`)}.Marshal()
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"wrong version", append([]byte{2}, good[1:]...)},
		{"request type", append([]byte{1, TypeCommand}, good[2:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing byte", append(bytes.Clone(good), 0)},
		{"unknown status", func() []byte { b := bytes.Clone(good); b[5] = 9; return b }()},
		{"string past end", []byte{1, 0x81, 200, 'x'}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseReply(tt.in); !errors.Is(err, ErrMalformed) {
				t.Fatalf("ParseReply(% x) = %v, want ErrMalformed", tt.in, err)
			}
		})
	}
}

func TestMarshalRefusesOversize(t *testing.T) {
	if _, err := (Request{ID: "c", Args: make([]byte, MaxPayload)}).Marshal(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("oversize request: %v", err)
	}
	if _, err := (Request{ID: string(make([]byte, 256))}).Marshal(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("256-byte id: %v", err)
	}
}
