package vectors

import (
	"encoding/hex"
	"fmt"
	"math"
	"strings"

	"github.com/fencegate/fencegate/fence"
)

// vector is one named wire form.
type vector struct {
	name string
	wire string
}

// alphabet is every id byte.
const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"

// validTokens are tokens the trusted ring accepts, chosen for their edges:
// shortest and longest ids, extreme numbers, every id byte, every body
// length mod 3 (so every base64 tail), and both trusted keys.
func (g *gen) validTokens() ([]vector, error) {
	tokens := []struct {
		name   string
		signer int
		tok    fence.Token
	}{
		{"doc-example", 0, fence.Token{Domain: "press-7", Epoch: 1767225600000, Seq: 42, Holder: "ctl-a", IssuedAt: 1767229200000, TTLms: 30000}},
		{"shortest", 0, fence.Token{Domain: "a", Epoch: 1, Seq: 1, Holder: "b", IssuedAt: 0, TTLms: 1}},
		{"body-mod3-1", 0, fence.Token{Domain: "a", Epoch: 1, Seq: 1, Holder: "bc", IssuedAt: 0, TTLms: 1}},
		{"body-mod3-2", 0, fence.Token{Domain: "a", Epoch: 1, Seq: 1, Holder: "bcd", IssuedAt: 0, TTLms: 1}},
		{"longest", 0, fence.Token{Domain: strings.Repeat("D", fence.MaxIDLen), Epoch: math.MaxUint64, Seq: math.MaxUint64,
			Holder: strings.Repeat("h", fence.MaxIDLen), IssuedAt: math.MinInt64, TTLms: math.MaxUint32}},
		{"alphabet", 0, fence.Token{Domain: alphabet, Epoch: 7, Seq: 9, Holder: reverse(alphabet), IssuedAt: -1, TTLms: 100}},
		{"high-bits", 0, fence.Token{Domain: "press-7", Epoch: 1 << 63, Seq: 1<<63 + 1, Holder: "ctl-b", IssuedAt: math.MaxInt64, TTLms: 1 << 31}},
		{"second-key", 1, fence.Token{Domain: "press-7", Epoch: 1767225600000, Seq: 43, Holder: "ctl-b", IssuedAt: 1767229260000, TTLms: 30000}},
		{"case-domain", 1, fence.Token{Domain: "Press-7", Epoch: 1767225600000, Seq: 42, Holder: "ctl-a", IssuedAt: 1767229200000, TTLms: 30000}},
	}
	var out []vector
	for _, t := range tokens {
		s, err := g.sign(t.signer, t.tok)
		if err != nil {
			return nil, err
		}
		out = append(out, vector{"valid-" + t.name, s.Raw})
	}
	return out, nil
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// example is the body of the worked example in docs/protocol.md, key 0.
func (g *gen) example() rawBody {
	return rawBody{version: 1, keyID: g.signers[0].KeyID(), epoch: 1767225600000, seq: 42,
		issuedAt: 1767229200000, ttl: 30000, domain: "press-7", holder: "ctl-a"}
}

// rejected are wire forms built to fail, at least one per reason of
// docs/protocol.md; the names say what the builder meant, the answers are
// Go's.
func (g *gen) rejected() []vector {
	var out []vector
	for _, part := range [][]vector{g.envelopeCases(), g.base64Cases(), g.layoutCases(), g.fieldCases(), g.signatureCases()} {
		out = append(out, part...)
	}
	return out
}

func (g *gen) envelopeCases() []vector {
	ex := g.example().bytes()
	good := signed(0, ex)
	_, sig, _ := strings.Cut(good[len(fence.WirePrefix):], ".")
	return []vector{
		{"oversize-1025", fence.WirePrefix + strings.Repeat("A", fence.MaxTokenLen-len(fence.WirePrefix)+1)},
		{"oversize-valid-then-padding", good + strings.Repeat("A", fence.MaxTokenLen-len(good)+1)},
		{"oversize-2048-garbage", strings.Repeat("\x00", 2048)},
		{"at-limit-1024-no-dot", fence.WirePrefix + strings.Repeat("A", fence.MaxTokenLen-len(fence.WirePrefix))},
		{"empty", ""},
		{"prefix-short", "fg1"},
		{"prefix-only", "fg1."},
		{"prefix-upper", "FG1." + good[4:]},
		{"prefix-version-2", "fg2." + good[4:]},
		{"prefix-colon", "fg1:" + good[4:]},
		{"prefix-leading-space", " " + good},
		{"no-signature-part", fence.WirePrefix + b64.EncodeToString(ex)},
		{"prefix-twice", fence.WirePrefix + good},
		{"body-missing", fence.WirePrefix + "." + sig},
	}
}

func (g *gen) base64Cases() []vector {
	ex := g.example().bytes()
	good := signed(0, ex)
	bodyPart, sigPart, _ := strings.Cut(good[len(fence.WirePrefix):], ".")
	withBody := func(b string) string { return fence.WirePrefix + b + "." + sigPart }
	withSig := func(s string) string { return fence.WirePrefix + bodyPart + "." + s }
	return []vector{
		{"base64-padding", withBody(bodyPart + "=")},
		{"base64-space", withBody(bodyPart[:10] + " " + bodyPart[10:])},
		{"base64-cr", withBody(bodyPart[:10] + "\r" + bodyPart[10:])},
		{"base64-lf", withBody(bodyPart[:10] + "\n" + bodyPart[10:])},
		{"base64-crlf-end", good + "\r\n"},
		{"base64-tab", withBody("\t" + bodyPart)},
		{"base64-nul", withSig(sigPart[:5] + "\x00" + sigPart[5:])},
		{"base64-std-plus", withBody(strings.Replace(bodyPart, bodyPart[3:4], "+", 1))},
		{"base64-std-slash", withSig("/" + sigPart[1:])},
		{"base64-high-byte", withBody(bodyPart + "\xff")},
		{"base64-utf8", withBody("é" + bodyPart)},
		{"base64-len-1-mod-4", withBody(bodyPart + "A")},
		{"base64-body-tail-bits-2", fence.WirePrefix + tailBits(ex[:len(ex)-1]) + "." + sigPart},
		{"base64-body-tail-bits-4", fence.WirePrefix + tailBits(append(append([]byte(nil), ex...), 'x')) + "." + sigPart},
		{"base64-sig-tail-bits", withSig(tailBits(signBody(0, ex)))},
		{"base64-sig-second-dot", withSig(sigPart[:20] + "." + sigPart[20:])},
		{"base64-sig-len-1-mod-4", withSig(sigPart[:len(sigPart)-1])},
		{"sig-87-chars", withSig(sigPart + "A")},
		{"base64-body-bad-and-sig-short", withBody("A")[:len(withBody("A"))-10]},
		{"base64-body-ok-sig-bad", withSig("A")},
	}
}

// b64Alphabet is the base64url alphabet in value order.
const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// tailBits is the base64url of b (whose length is not a multiple of 3)
// with the lowest unused bit of its last character set: decodable in
// lenient decoders, refused by strict ones.
func tailBits(b []byte) string {
	enc := []byte(b64.EncodeToString(b))
	last := strings.IndexByte(b64Alphabet, enc[len(enc)-1])
	enc[len(enc)-1] = b64Alphabet[last|1]
	return string(enc)
}

func (g *gen) layoutCases() []vector {
	ex := g.example().bytes()
	var out []vector
	for _, n := range []int{0, 1, 2, 36, 37, 38, 44, 45, 46, 50} {
		out = append(out, vector{fmt.Sprintf("body-cut-%d", n), signed(0, ex[:n])})
	}
	sig64 := signBody(0, ex)
	long := g.example()
	long.domain = strings.Repeat("d", 200)
	longBody := long.bytes()
	return append(out,
		vector{"version-0", signed(0, append([]byte{0}, ex[1:]...))},
		vector{"version-2", signed(0, append([]byte{2}, ex[1:]...))},
		vector{"version-ff-short", signed(0, []byte{0xff})},
		vector{"trailing-1", signed(0, append(append([]byte(nil), ex...), 0))},
		vector{"trailing-holder-byte", signed(0, append(append([]byte(nil), ex...), 'x'))},
		vector{"domain-len-past-end", signed(0, withByte(ex, 37, 200))},
		vector{"holder-len-past-end", signed(0, withByte(ex, 45, 6))},
		vector{"holder-len-short", signed(0, withByte(ex, 45, 4))},
		vector{"sig-63", wireOf(ex, sig64[:63])},
		vector{"sig-65", wireOf(ex, append(append([]byte(nil), sig64...), 0))},
		vector{"sig-empty", wireOf(ex, nil)},
		vector{"body-over-295-id-200", signed(0, longBody)},
		vector{"body-over-295-cut", signed(0, longBody[:len(longBody)-1])},
		vector{"body-over-295-trailing", signed(0, append(append([]byte(nil), longBody...), 'x'))},
		vector{"body-max-decodable-zeros", wireOf(make([]byte, 699), sig64)},
		vector{"body-max-decodable-layout", wireOf(maxLayout(ex), sig64)},
	)
}

// maxLayout is the longest body a 1024-byte token can carry (699 bytes):
// the example's header, 255-byte domain and holder, then trailing bytes.
func maxLayout(ex []byte) []byte {
	b := append([]byte(nil), ex[:37]...)
	b = append(b, 255)
	b = append(b, strings.Repeat("d", 255)...)
	b = append(b, 255)
	b = append(b, strings.Repeat("h", 255)...)
	for len(b) < 699 {
		b = append(b, 'x')
	}
	return b
}

func withByte(b []byte, i int, v byte) []byte {
	out := append([]byte(nil), b...)
	out[i] = v
	return out
}

func (g *gen) fieldCases() []vector {
	cases := []struct {
		name string
		edit func(*rawBody)
	}{
		{"id-domain-empty", func(r *rawBody) { r.domain = "" }},
		{"id-holder-empty", func(r *rawBody) { r.holder = "" }},
		{"id-domain-129", func(r *rawBody) { r.domain = strings.Repeat("d", 129) }},
		{"id-holder-129", func(r *rawBody) { r.holder = strings.Repeat("h", 129) }},
		{"id-domain-slash", func(r *rawBody) { r.domain = "press/7" }},
		{"id-domain-space", func(r *rawBody) { r.domain = "press 7" }},
		{"id-domain-plus", func(r *rawBody) { r.domain = "press+" }},
		{"id-domain-hash", func(r *rawBody) { r.domain = "#" }},
		{"id-holder-nul", func(r *rawBody) { r.holder = "ctl\x00a" }},
		{"id-holder-high", func(r *rawBody) { r.holder = "ctl\x80" }},
		{"id-holder-255", func(r *rawBody) { r.holder = strings.Repeat("h", 255) }},
		{"id-both-bad", func(r *rawBody) { r.domain, r.holder = "", "" }},
		{"id-bad-and-epoch-0", func(r *rawBody) { r.domain, r.epoch = "a/b", 0 }},
		{"field-epoch-0", func(r *rawBody) { r.epoch = 0 }},
		{"field-seq-0", func(r *rawBody) { r.seq = 0 }},
		{"field-ttl-0", func(r *rawBody) { r.ttl = 0 }},
		{"field-all-0", func(r *rawBody) { r.epoch, r.seq, r.ttl = 0, 0, 0 }},
		{"version-and-bad-id", func(r *rawBody) { r.version, r.domain = 9, "" }},
	}
	var out []vector
	for _, c := range cases {
		r := g.example()
		c.edit(&r)
		out = append(out, vector{c.name, signed(0, r.bytes())})
	}
	return out
}

func (g *gen) signatureCases() []vector {
	ex := g.example()
	body := ex.bytes()
	sig := signBody(0, body)
	other := g.example()
	other.holder = "ctl-x"
	wrongKeyID := g.example()
	wrongKeyID.keyID = g.signers[1].KeyID()
	unknown := g.example()
	unknown.keyID = g.untrusted.KeyID()
	zeroKey := g.example()
	zeroKey.keyID = fence.KeyID{}
	return []vector{
		{"unknown-key", signed(UntrustedSeed, unknown.bytes())},
		{"unknown-key-zero-id", signed(0, zeroKey.bytes())},
		{"unknown-key-bad-sig", wireOf(unknown.bytes(), make([]byte, 64))},
		{"signature-flipped-bit", wireOf(body, withByte(sig, 10, sig[10]^1))},
		{"signature-zero", wireOf(body, make([]byte, 64))},
		{"signature-of-other-body", wireOf(other.bytes(), sig)},
		{"signature-key-id-of-other-key", signed(0, wrongKeyID.bytes())},
		{"signature-non-canonical-s", wireOf(body, nonCanonical(sig))},
		{"signature-without-prefix", wireOf(body, ed25519SignRaw(body))},
	}
}

// tokensFile is tokens.txt: the ring, then one line per vector.
func (g *gen) tokensFile() (string, error) {
	valid, err := g.validTokens()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# fg1 token vectors, generated by firmware/vectors (go generate); do not edit.\n")
	b.WriteString("# key <key_id> <public_key>: the trusted ring.\n")
	b.WriteString("# tok <name> <wire hex> <verify> <parse> <key_id> <epoch> <seq> <issued_at> <ttl_ms> <domain> <holder>\n")
	b.WriteString("#   (the seven fields are - unless parse is ok)\n")
	b.WriteString(g.ringLines())
	for _, v := range append(valid, g.rejected()...) {
		line, err := g.tokenLine(v)
		if err != nil {
			return "", err
		}
		b.WriteString(line)
	}
	return b.String(), nil
}

func (g *gen) tokenLine(v vector) (string, error) {
	a := g.answer(v.wire)
	vname, _, err := reasonOf(a.verify)
	if err != nil {
		return "", fmt.Errorf("%s: %w", v.name, err)
	}
	pname, _, err := reasonOf(a.parse)
	if err != nil {
		return "", fmt.Errorf("%s: %w", v.name, err)
	}
	fields := "- - - - - - -"
	if a.parse == nil {
		t := a.tok
		fields = fmt.Sprintf("%s %d %d %d %d %s %s", t.KeyID, t.Epoch, t.Seq, t.IssuedAt, t.TTLms, t.Domain, t.Holder)
	}
	wire := hex.EncodeToString([]byte(v.wire))
	if wire == "" {
		wire = "-"
	}
	return fmt.Sprintf("tok %s %s %s %s %s\n", v.name, wire, vname, pname, fields), nil
}
