package fence

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestKeyFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	priv, err := GenerateKey()
	if err != nil {
		t.Fatalf("GenerateKey: %v", err)
	}
	if len(priv) != ed25519.PrivateKeySize {
		t.Fatalf("GenerateKey returned %d bytes", len(priv))
	}
	if other, _ := GenerateKey(); bytes.Equal(other, priv) {
		t.Fatal("GenerateKey returned the same key twice")
	}
	privPath := filepath.Join(dir, "controller.key")
	pubPath := filepath.Join(dir, "controller.pub")
	if err := WritePrivateKey(privPath, priv, false); err != nil {
		t.Fatalf("WritePrivateKey: %v", err)
	}
	if err := WritePublicKey(pubPath, priv.Public().(ed25519.PublicKey)); err != nil {
		t.Fatalf("WritePublicKey: %v", err)
	}
	checkMode(t, privPath, 0o600)
	checkMode(t, pubPath, 0o644)
	checkOnlyFiles(t, dir, "controller.key", "controller.pub")

	gotPriv, err := LoadPrivateKey(privPath)
	if err != nil {
		t.Fatalf("LoadPrivateKey: %v", err)
	}
	if !priv.Equal(gotPriv) {
		t.Fatal("loaded private key differs from the written one")
	}
	gotPub, err := LoadPublicKey(pubPath)
	if err != nil {
		t.Fatalf("LoadPublicKey: %v", err)
	}
	if !gotPub.Equal(priv.Public()) {
		t.Fatal("loaded public key differs from the written one")
	}

	// The loaded halves work together: sign with one, verify with the other.
	tok := mustSign(t, mustSigner(t, gotPriv), exampleToken())
	if _, err := mustKeyRing(t, 1, gotPub).Verify(tok.Raw); err != nil {
		t.Fatalf("Verify with the loaded public key: %v", err)
	}
}

func TestWritePrivateKeyOverwrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "controller.key")
	first, second := testKey(0), testKey(0x20)

	if err := os.WriteFile(path, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WritePrivateKey(path, first, false)
	if !errors.Is(err, os.ErrExist) {
		t.Fatalf("WritePrivateKey over an existing file = %v, want os.ErrExist", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "keep me" {
		t.Fatalf("refused write changed the file to %q", data)
	}

	if err := WritePrivateKey(path, first, true); err != nil {
		t.Fatalf("WritePrivateKey(overwrite): %v", err)
	}
	checkMode(t, path, 0o600) // the 0644 file was replaced, not rewritten in place
	if err := WritePrivateKey(path, second, true); err != nil {
		t.Fatalf("WritePrivateKey(overwrite) again: %v", err)
	}
	if got, err := LoadPrivateKey(path); err != nil || !got.Equal(second) {
		t.Fatalf("LoadPrivateKey after overwrite = %v; want the second key", err)
	}

	dangling := filepath.Join(dir, "dangling.key")
	if err := os.Symlink(filepath.Join(dir, "missing"), dangling); err != nil {
		t.Fatal(err)
	}
	if err := WritePrivateKey(dangling, first, false); !errors.Is(err, os.ErrExist) {
		t.Fatalf("WritePrivateKey over a dangling symlink = %v, want os.ErrExist", err)
	}
	checkOnlyFiles(t, dir, "controller.key", "dangling.key")

	if err := WritePrivateKey(filepath.Join(dir, "no", "such", "dir"), first, false); err == nil {
		t.Fatal("WritePrivateKey into a missing directory succeeded")
	}
}

func TestLoadKeyErrors(t *testing.T) {
	dir := t.TempDir()
	priv := testKey(0)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecPriv, err := x509.MarshalPKCS8PrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	ecPub, err := x509.MarshalPKIXPublicKey(ecKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	pemOf := func(typ string, der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}) }

	privPEM := filepath.Join(dir, "good.key")
	pubPEM := filepath.Join(dir, "good.pub")
	if err := WritePrivateKey(privPEM, priv, false); err != nil {
		t.Fatal(err)
	}
	if err := WritePublicKey(pubPEM, priv.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	read := func(path string) []byte {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}

	tests := []struct {
		name    string
		data    []byte
		private bool  // load with LoadPrivateKey, else LoadPublicKey
		want    error // nil: must load
	}{
		{name: "private key file", data: read(privPEM), private: true},
		{name: "public key file", data: read(pubPEM)},
		{name: "private key after a comment line", data: append([]byte("controller key, made by hand\n"), read(privPEM)...), private: true},
		{name: "public file as private", data: read(pubPEM), private: true, want: ErrKeyFile},
		{name: "private file as public", data: read(privPEM), want: ErrKeyFile},
		{name: "not PEM, as private", data: []byte("hello, world\n"), private: true, want: ErrKeyFile},
		{name: "not PEM, as public", data: []byte("hello, world\n"), want: ErrKeyFile},
		{name: "empty, as private", data: nil, private: true, want: ErrKeyFile},
		{name: "raw 64-byte key, as private", data: priv, private: true, want: ErrKeyFile},
		{name: "garbage DER, as private", data: pemOf("PRIVATE KEY", []byte("garbage")), private: true, want: ErrKeyFile},
		{name: "garbage DER, as public", data: pemOf("PUBLIC KEY", []byte("garbage")), want: ErrKeyFile},
		{name: "truncated DER, as private", data: pemOf("PRIVATE KEY", mustPKCS8(t, priv)[:20]), private: true, want: ErrKeyFile},
		{name: "ECDSA PKCS#8, as private", data: pemOf("PRIVATE KEY", ecPriv), private: true, want: ErrKeyFile},
		{name: "ECDSA PKIX, as public", data: pemOf("PUBLIC KEY", ecPub), want: ErrKeyFile},
		{name: "Ed25519 DER under a wrong PEM type", data: pemOf("EC PRIVATE KEY", mustPKCS8(t, priv)), private: true, want: ErrKeyFile},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "case"+string(rune('a'+i)))
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			var err error
			if tc.private {
				var k ed25519.PrivateKey
				k, err = LoadPrivateKey(path)
				if err == nil && !k.Equal(priv) {
					t.Fatal("loaded a different private key")
				}
			} else {
				var k ed25519.PublicKey
				k, err = LoadPublicKey(path)
				if err == nil && !k.Equal(priv.Public()) {
					t.Fatal("loaded a different public key")
				}
			}
			if tc.want == nil {
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				return
			}
			checkOnly(t, err, tc.want)
		})
	}

	t.Run("missing file", func(t *testing.T) {
		missing := filepath.Join(dir, "missing")
		for _, err := range []error{
			func() error { _, err := LoadPrivateKey(missing); return err }(),
			func() error { _, err := LoadPublicKey(missing); return err }(),
		} {
			if !errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrKeyFile) {
				t.Fatalf("load of a missing file = %v, want os.ErrNotExist and not ErrKeyFile", err)
			}
		}
	})
}

// TestKeyFileVectors checks fence against the example key pair of RFC 8410,
// which OpenSSL reads and writes identically (see testdata/README.md).
func TestKeyFileVectors(t *testing.T) {
	const (
		wantSeed = "d4ee72dbf913584ad5b6d8f1f769f8ad3afe7c28cbf1d4fbe097a88f44755842"
		wantPub  = "19bf44096984cdfe8541bac167dc3b96c85086aa30b6b6cb0c5c38ad703166e1"
	)
	privFile := filepath.Join("testdata", "rfc8410-private.pem")
	pubFile := filepath.Join("testdata", "rfc8410-public.pem")
	priv, err := LoadPrivateKey(privFile)
	if err != nil {
		t.Fatalf("LoadPrivateKey: %v", err)
	}
	pub, err := LoadPublicKey(pubFile)
	if err != nil {
		t.Fatalf("LoadPublicKey: %v", err)
	}
	if got := hex.EncodeToString(priv.Seed()); got != wantSeed {
		t.Fatalf("seed = %s, want %s", got, wantSeed)
	}
	if got := hex.EncodeToString(pub); got != wantPub {
		t.Fatalf("public key = %s, want %s", got, wantPub)
	}
	if !pub.Equal(priv.Public()) {
		t.Fatal("the RFC 8410 files are not one key pair")
	}

	// Writing the keys back gives the RFC's bytes exactly.
	dir := t.TempDir()
	if err := WritePrivateKey(filepath.Join(dir, "k"), priv, false); err != nil {
		t.Fatal(err)
	}
	if err := WritePublicKey(filepath.Join(dir, "p"), pub); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{{filepath.Join(dir, "k"), privFile}, {filepath.Join(dir, "p"), pubFile}} {
		got, _ := os.ReadFile(c[0])
		want, _ := os.ReadFile(c[1])
		if !bytes.Equal(got, want) {
			t.Fatalf("written file:\n%s\nwant %s:\n%s", got, c[1], want)
		}
	}
}

// TestOpenSSLInterop exchanges keys and a signature with the openssl command:
// keys it generates load, keys fence writes it reads, and a token whose
// signature openssl made verifies.
func TestOpenSSLInterop(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed; TestKeyFileVectors covers the file format with fixed vectors")
	}
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	if out, err := exec.Command(openssl, "genpkey", "-algorithm", "ed25519", "-out", path("ossl.key")).CombinedOutput(); err != nil {
		t.Skipf("this openssl cannot generate Ed25519 keys: %v\n%s", err, out)
	}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(openssl, args...).CombinedOutput(); err != nil {
			t.Fatalf("openssl %v: %v\n%s", args, err, out)
		}
	}

	// openssl → fence.
	run("pkey", "-in", path("ossl.key"), "-pubout", "-out", path("ossl.pub"))
	priv, err := LoadPrivateKey(path("ossl.key"))
	if err != nil {
		t.Fatalf("LoadPrivateKey(openssl key): %v", err)
	}
	pub, err := LoadPublicKey(path("ossl.pub"))
	if err != nil {
		t.Fatalf("LoadPublicKey(openssl key): %v", err)
	}
	if !pub.Equal(priv.Public()) {
		t.Fatal("openssl's public key does not match its private key as loaded")
	}

	// fence → openssl.
	mine := testKey(0)
	if err := WritePrivateKey(path("fence.key"), mine, false); err != nil {
		t.Fatal(err)
	}
	if err := WritePublicKey(path("fence.pub"), mine.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	run("pkey", "-in", path("fence.key"), "-pubout", "-out", path("derived.pub"))
	derived, _ := os.ReadFile(path("derived.pub"))
	written, _ := os.ReadFile(path("fence.pub"))
	if !bytes.Equal(derived, written) {
		t.Fatalf("openssl derived public key\n%s\nfence wrote\n%s", derived, written)
	}

	// An openssl signature over prefix+body is a valid token signature.
	tok := exampleToken()
	tok.KeyID = KeyIDOf(pub)
	body := encodeBody(tok)
	if err := os.WriteFile(path("msg"), signedMessage(body), 0o600); err != nil {
		t.Fatal(err)
	}
	run("pkeyutl", "-sign", "-inkey", path("ossl.key"), "-rawin", "-in", path("msg"), "-out", path("sig"))
	sig, err := os.ReadFile(path("sig"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := mustKeyRing(t, 1, pub).Verify(encodeWire(body, sig))
	if err != nil {
		t.Fatalf("Verify(token signed by openssl): %v", err)
	}
	checkFields(t, got, tok)
}

func mustPKCS8(t *testing.T, priv ed25519.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != want {
		t.Fatalf("%s has mode %v, want a regular file with %v", path, fi.Mode(), want)
	}
}

// checkOnlyFiles fails t unless dir holds exactly names: no temporary files
// are left behind.
func checkOnlyFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if len(got) != len(names) {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
	for i := range names {
		if got[i] != names[i] {
			t.Fatalf("%s holds %v, want %v", dir, got, names)
		}
	}
}

func TestNewSignerRejectsMismatchedPublicHalf(t *testing.T) {
	priv, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	bad := append(ed25519.PrivateKey(nil), priv[:ed25519.SeedSize]...)
	bad = append(bad, other[ed25519.SeedSize:]...)
	if _, err := NewSigner(bad); !errors.Is(err, ErrKeyFile) {
		t.Fatalf("NewSigner with a foreign public half: %v, want ErrKeyFile", err)
	}
	if _, err := NewSigner(priv); err != nil {
		t.Fatalf("NewSigner with a good key: %v", err)
	}
}

func TestWriteKeyPair(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "keys")
	id, err := WriteKeyPair(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := LoadPrivateKey(filepath.Join(dir, PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := LoadPublicKey(filepath.Join(dir, PublicKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if KeyIDOf(pub) != id || !pub.Equal(priv.Public()) {
		t.Fatal("key pair files do not match the returned id")
	}
	if _, err := WriteKeyPair(dir, false); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second write without overwrite: %v", err)
	}
	again, _ := LoadPrivateKey(filepath.Join(dir, PrivateKeyFile))
	if !again.Equal(priv) {
		t.Fatal("refused write changed the key")
	}
}
