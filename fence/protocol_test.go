package fence

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"os"
	"strings"
	"testing"
)

// TestProtocolDocExample recomputes the worked example of docs/protocol.md
// and checks that the document shows exactly these values.
func TestProtocolDocExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatalf("read the protocol document: %v", err)
	}
	priv := testKey(0)
	if hex.EncodeToString(priv.Seed()) != "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f" {
		t.Fatalf("example seed is %x", priv.Seed())
	}
	signer := mustSigner(t, priv)
	tok := mustSign(t, signer, exampleToken())
	body, sig, err := splitWire(tok.Raw)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := mustKeyRing(t, 1, signer.Public()).Verify(tok.Raw); err != nil || got != tok {
		t.Fatalf("Verify(example) = %+v, %v", got, err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	pemLine := func(typ string, der []byte) string {
		return strings.Split(string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})), "\n")[1]
	}
	u64 := func(v uint64) string { return "`" + hex.EncodeToString(binary.BigEndian.AppendUint64(nil, v)) + "`" }

	want := []struct {
		name, text string
	}{
		{name: "wire form", text: "\n" + tok.Raw + "\n"},
		{name: "wire length", text: "Wire form (159 bytes)"},
		{name: "body hex", text: "\n" + hex.EncodeToString(body) + "\n"},
		{name: "body length", text: "Its 51-byte body"},
		{name: "signature hex", text: "\n" + hex.EncodeToString(sig) + "\n"},
		{name: "signature prefix hex", text: "`" + hex.EncodeToString([]byte(SignaturePrefix)) + "`"},
		{name: "signed message length", text: "(70 bytes)"},
		{name: "public key hex", text: "public key: `" + hex.EncodeToString(signer.Public()) + "`"},
		{name: "key id", text: "key id: `" + signer.KeyID().String() + "`"},
		{name: "private key PEM", text: "    " + pemLine("PRIVATE KEY", privDER) + "\n"},
		{name: "public key PEM", text: "    " + pemLine("PUBLIC KEY", pubDER) + "\n"},
		{name: "key_id row", text: "| 1 | key_id | | `" + signer.KeyID().String() + "` |"},
		{name: "epoch row", text: "| 9 | epoch | 1767225600000 | " + u64(tok.Epoch) + " |"},
		{name: "seq row", text: "| 17 | seq | 42 | " + u64(tok.Seq) + " |"},
		{name: "issued_at row", text: "| 25 | issued_at | 1767229200000 | " + u64(uint64(tok.IssuedAt)) + " |"},
		{name: "ttl_ms row", text: "| 33 | ttl_ms | 30000 | `" + hex.EncodeToString(binary.BigEndian.AppendUint32(nil, tok.TTLms)) + "` |"},
		{name: "domain row", text: "| 38 | domain | `press-7` | `" + hex.EncodeToString([]byte(tok.Domain)) + "` |"},
		{name: "holder row", text: "| 46 | holder | `ctl-a` | `" + hex.EncodeToString([]byte(tok.Holder)) + "` |"},
		{name: "openssl recipe body", text: "printf '%s' " + hex.EncodeToString(body) + " | xxd -r -p >> msg"},
	}
	for _, w := range want {
		if !strings.Contains(string(doc), w.text) {
			t.Errorf("docs/protocol.md lacks the %s: %q", w.name, w.text)
		}
	}
	if len(tok.Raw) != 159 || len(body) != 51 || len(SignaturePrefix)+len(body) != 70 {
		t.Errorf("example sizes: wire %d, body %d, message %d", len(tok.Raw), len(body), len(SignaturePrefix)+len(body))
	}
}

// TestDocumentedSizes checks the size bounds stated in docs/protocol.md.
func TestDocumentedSizes(t *testing.T) {
	signer := mustSigner(t, testKey(0))
	tests := []struct {
		name          string
		idLen         int
		bodyLen, wire int
	}{
		{name: "shortest ids", idLen: 1, bodyLen: 41, wire: 146},
		{name: "longest ids", idLen: MaxIDLen, bodyLen: 295, wire: 485},
	}
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatalf("read the protocol document: %v", err)
	}
	for _, claim := range []string{"41 to 295 bytes", "146 to 485 bytes", "The fixed header is 37 bytes"} {
		if !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), claim) {
			t.Errorf("docs/protocol.md no longer says %q", claim)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := strings.Repeat("x", tc.idLen)
			tok := mustSign(t, signer, Token{Domain: id, Epoch: 1, Seq: 1, Holder: id, TTLms: 1})
			body, _, err := splitWire(tok.Raw)
			if err != nil {
				t.Fatal(err)
			}
			if len(body) != tc.bodyLen || len(tok.Raw) != tc.wire {
				t.Fatalf("body %d bytes, wire %d bytes; the document says %d and %d", len(body), len(tok.Raw), tc.bodyLen, tc.wire)
			}
		})
	}
	// The DER prefix of an Ed25519 public key that the document's `tail -c 32` relies on.
	der, err := x509.MarshalPKIXPublicKey(signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(der[:len(der)-ed25519.PublicKeySize]); got != "302a300506032b6570032100" {
		t.Fatalf("PKIX prefix %s", got)
	}
}
