package fence

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestCompare(t *testing.T) {
	at := func(domain string, epoch, seq uint64) Token {
		return Token{Domain: domain, Epoch: epoch, Seq: seq, Holder: "h", IssuedAt: 1, TTLms: 1}
	}
	tests := []struct {
		name    string
		a, b    Token
		want    int
		wantErr error
	}{
		{name: "same position", a: at("d", 5, 9), b: at("d", 5, 9), want: 0},
		{name: "lower seq, same epoch", a: at("d", 5, 8), b: at("d", 5, 9), want: -1},
		{name: "higher seq, same epoch", a: at("d", 5, 10), b: at("d", 5, 9), want: 1},
		{name: "newer epoch beats larger seq", a: at("d", 6, 1), b: at("d", 5, math.MaxUint64), want: 1},
		{name: "older epoch loses to smaller seq", a: at("d", 5, math.MaxUint64), b: at("d", 6, 1), want: -1},
		{name: "extremes", a: at("d", math.MaxUint64, math.MaxUint64), b: at("d", math.MaxUint64, math.MaxUint64-1), want: 1},
		{name: "different domains", a: at("a", 5, 9), b: at("b", 5, 9), wantErr: ErrDomainMismatch},
		{name: "domains differing only in case", a: at("Press", 1, 1), b: at("press", 2, 2), wantErr: ErrDomainMismatch},
		{name: "domain vs zero token", a: at("d", 1, 1), b: Token{}, wantErr: ErrDomainMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.a.Compare(tc.b)
			back, backErr := tc.b.Compare(tc.a)
			if tc.wantErr != nil {
				checkOnly(t, err, tc.wantErr)
				checkOnly(t, backErr, tc.wantErr)
				if got != 0 || back != 0 {
					t.Fatalf("Compare returned orders %d and %d with its error, want 0", got, back)
				}
				return
			}
			if err != nil || backErr != nil {
				t.Fatalf("Compare: %v, %v", err, backErr)
			}
			if got != tc.want || back != -tc.want {
				t.Fatalf("a.Compare(b) = %d, b.Compare(a) = %d; want %d and %d", got, back, tc.want, -tc.want)
			}
			if p := ComparePosition(tc.a.Epoch, tc.a.Seq, tc.b.Epoch, tc.b.Seq); p != tc.want {
				t.Fatalf("ComparePosition = %d, want %d", p, tc.want)
			}
		})
	}
}

func TestSameLease(t *testing.T) {
	signer := mustSigner(t, testKey(0))
	rotated := mustSigner(t, testKey(0x20))
	base := mustSign(t, signer, exampleToken())
	tests := []struct {
		name   string
		other  Token
		same   bool
		cmp    int   // a.Compare(other) when the domains match
		cmpErr error // expected Compare error
	}{
		{name: "identical", other: base, same: true},
		{name: "re-signed by another key", other: mustSign(t, rotated, exampleToken()), same: true},
		{name: "TTL differs", other: func() Token { u := base; u.TTLms++; return u }(), same: true},
		{name: "holder differs at equal position", other: func() Token { u := base; u.Holder = "ctl-b"; return u }(), same: false},
		{name: "issued_at differs at equal position", other: func() Token { u := base; u.IssuedAt++; return u }(), same: false},
		{name: "next seq", other: func() Token { u := base; u.Seq++; return u }(), same: false, cmp: -1},
		{name: "older epoch", other: func() Token { u := base; u.Epoch--; return u }(), same: false, cmp: 1},
		{name: "other domain", other: func() Token { u := base; u.Domain = "press-8"; return u }(), same: false, cmpErr: ErrDomainMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := base.SameLease(tc.other); got != tc.same {
				t.Fatalf("SameLease = %v, want %v", got, tc.same)
			}
			if got := tc.other.SameLease(base); got != tc.same {
				t.Fatalf("SameLease is not symmetric: reversed = %v", got)
			}
			cmp, err := base.Compare(tc.other)
			if tc.cmpErr != nil {
				checkOnly(t, err, tc.cmpErr)
				return
			}
			if err != nil || cmp != tc.cmp {
				t.Fatalf("Compare = %d, %v; want %d", cmp, err, tc.cmp)
			}
			// The same lease is always at the same position.
			if tc.same && cmp != 0 {
				t.Fatalf("same lease at different positions")
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Token)
		want   error
	}{
		{name: "valid", mutate: func(*Token) {}},
		{name: "negative issued_at is fine", mutate: func(tok *Token) { tok.IssuedAt = -1 }},
		{name: "domain with space", mutate: func(tok *Token) { tok.Domain = "a b" }, want: ErrInvalidID},
		{name: "domain of 129 bytes", mutate: func(tok *Token) { tok.Domain = strings.Repeat("a", 129) }, want: ErrInvalidID},
		{name: "domain of 128 bytes", mutate: func(tok *Token) { tok.Domain = strings.Repeat("a", 128) }},
		{name: "holder with colon", mutate: func(tok *Token) { tok.Holder = "ctl:a" }, want: ErrInvalidID},
		{name: "epoch 0", mutate: func(tok *Token) { tok.Epoch = 0 }, want: ErrInvalidField},
		{name: "seq 0", mutate: func(tok *Token) { tok.Seq = 0 }, want: ErrInvalidField},
		{name: "ttl 0", mutate: func(tok *Token) { tok.TTLms = 0 }, want: ErrInvalidField},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := exampleToken()
			tc.mutate(&tok)
			err := tok.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			checkOnly(t, err, tc.want)
		})
	}
}

func TestTokenAccessors(t *testing.T) {
	tok := exampleToken()
	if got, want := tok.String(), "press-7@1767225600000.42/ctl-a"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got, want := tok.Fence(), (Fence{Epoch: 1767225600000, Seq: 42, Holder: "ctl-a"}); got != want {
		t.Errorf("Fence = %+v, want %+v", got, want)
	}
	if got, want := tok.Issued(), time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("Issued = %v, want %v", got, want)
	}
	if got := tok.TTL(); got != 30*time.Second {
		t.Errorf("TTL = %v, want 30s", got)
	}
	if tok.IsZero() || !(Token{}).IsZero() {
		t.Errorf("IsZero: example %v, zero %v; want false, true", tok.IsZero(), (Token{}).IsZero())
	}
}

func TestIDs(t *testing.T) {
	tests := []struct {
		name  string
		id    string
		valid bool
	}{
		{name: "one byte", id: "a", valid: true},
		{name: "whole alphabet", id: idAlphabet, valid: true},
		{name: "128 bytes", id: strings.Repeat("x", MaxIDLen), valid: true},
		{name: "dots only", id: "..", valid: true},
		{name: "empty", id: ""},
		{name: "129 bytes", id: strings.Repeat("x", MaxIDLen+1)},
		{name: "space", id: "a b"},
		{name: "slash", id: "a/b"},
		{name: "plus", id: "a+b"},
		{name: "MQTT wildcard", id: "a#"},
		{name: "NUL", id: "a\x00"},
		{name: "non-ASCII letter", id: "é"},
		{name: "byte 0xff", id: "a\xff"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidID(tc.id); got != tc.valid {
				t.Fatalf("ValidID(%q) = %v, want %v", tc.id, got, tc.valid)
			}
			err := CheckID("domain", tc.id)
			if tc.valid {
				if err != nil {
					t.Fatalf("CheckID: %v", err)
				}
				return
			}
			checkOnly(t, err, ErrInvalidID)
			if !strings.Contains(err.Error(), "domain") {
				t.Fatalf("CheckID error %q does not name the field", err)
			}
		})
	}
}

func TestKeyID(t *testing.T) {
	signer := mustSigner(t, testKey(0))
	id := signer.KeyID()
	if got := KeyIDOf(signer.Public()); got != id {
		t.Fatalf("KeyIDOf(public) = %s, signer says %s", got, id)
	}
	// Fixed vector: the key of docs/protocol.md's worked example.
	if got, want := id.String(), "56475aa75463474c"; got != want {
		t.Fatalf("key id = %s, want %s", got, want)
	}
	tests := []struct {
		name string
		text string
		ok   bool
	}{
		{name: "own text form", text: id.String(), ok: true},
		{name: "upper case", text: strings.ToUpper(id.String()), ok: true},
		{name: "too short", text: id.String()[:14]},
		{name: "too long", text: id.String() + "00"},
		{name: "not hex", text: "zz475aa75463474c"},
		{name: "empty", text: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseKeyID(tc.text)
			if !tc.ok {
				if err == nil {
					t.Fatalf("ParseKeyID(%q) = %s, want an error", tc.text, got)
				}
				return
			}
			if err != nil || got != id {
				t.Fatalf("ParseKeyID(%q) = %s, %v; want %s", tc.text, got, err, id)
			}
		})
	}
}

func TestNewSignerRejectsShortKey(t *testing.T) {
	for _, n := range []int{0, 32, 63, 65} {
		if _, err := NewSigner(make([]byte, n)); !errors.Is(err, ErrKeyFile) {
			t.Errorf("NewSigner(%d bytes) = %v, want ErrKeyFile", n, err)
		}
	}
}
