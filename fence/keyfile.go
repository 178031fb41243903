package fence

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fencegate/fencegate/internal/atomicfile"
)

// PEM block types of key files: PKCS#8 private keys and PKIX public keys, as
// written and read by OpenSSL ("openssl genpkey -algorithm ed25519").
const (
	privatePEMType = "PRIVATE KEY"
	publicPEMType  = "PUBLIC KEY"
)

// GenerateKey returns a new Ed25519 private key from crypto/rand.
func GenerateKey() (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return priv, nil
}

// WritePrivateKey writes priv as a PKCS#8 PEM file readable only by its owner
// (mode 0600). The file is replaced atomically; an existing file is
// overwritten only if overwrite is set.
func WritePrivateKey(path string, priv ed25519.PrivateKey, overwrite bool) error {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("write private key: %w", err)
	}
	return writePEM(path, privatePEMType, der, 0o600, overwrite)
}

// WritePublicKey writes pub as a PKIX PEM file (mode 0644), replacing any
// existing file atomically.
func WritePublicKey(path string, pub ed25519.PublicKey) error {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return fmt.Errorf("write public key: %w", err)
	}
	return writePEM(path, publicPEMType, der, 0o644, true)
}

// LoadPrivateKey reads an Ed25519 private key from a PKCS#8 PEM file.
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	der, err := readPEM(path, privatePEMType)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrKeyFile, path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s: %T is not an Ed25519 key", ErrKeyFile, path, k)
	}
	return priv, nil
}

// LoadPublicKey reads an Ed25519 public key from a PKIX PEM file.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	der, err := readPEM(path, publicPEMType)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrKeyFile, path, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s: %T is not an Ed25519 key", ErrKeyFile, path, k)
	}
	return pub, nil
}

func readPEM(path, wantType string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%w: %s: no PEM block", ErrKeyFile, path)
	}
	if block.Type != wantType {
		return nil, fmt.Errorf("%w: %s: PEM block %q, want %q", ErrKeyFile, path, block.Type, wantType)
	}
	return block.Bytes, nil
}

// writePEM writes one PEM block to path atomically (see internal/atomicfile).
func writePEM(path, blockType string, der []byte, mode os.FileMode, overwrite bool) error {
	data := pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
	return atomicfile.WriteFile(path, data, mode, overwrite)
}

// Key pair file names written by WriteKeyPair.
const (
	PrivateKeyFile = "controller.key"
	PublicKeyFile  = "controller.pub"
)

// WriteKeyPair generates a controller key and writes dir/controller.key
// (0600) and dir/controller.pub, creating dir (0700) if needed. Without
// overwrite an existing controller.key is an error wrapping os.ErrExist and
// nothing is written.
func WriteKeyPair(dir string, overwrite bool) (KeyID, error) {
	priv, err := WriteKeyFiles(filepath.Join(dir, PrivateKeyFile), filepath.Join(dir, PublicKeyFile), overwrite)
	if err != nil {
		return KeyID{}, err
	}
	return KeyIDOf(priv.Public().(ed25519.PublicKey)), nil
}

// WriteKeyFiles generates a key and writes it to keyPath (0600) and its
// public half to pubPath, creating keyPath's directory (0700) if needed.
// Without overwrite an existing keyPath is an error wrapping os.ErrExist and
// nothing is written.
func WriteKeyFiles(keyPath, pubPath string, overwrite bool) (ed25519.PrivateKey, error) {
	if err := os.MkdirAll(filepath.Dir(keyPath), 0o700); err != nil {
		return nil, fmt.Errorf("key directory: %w", err)
	}
	priv, err := GenerateKey()
	if err != nil {
		return nil, err
	}
	if err := WritePrivateKey(keyPath, priv, overwrite); err != nil {
		return nil, err
	}
	if err := WritePublicKey(pubPath, priv.Public().(ed25519.PublicKey)); err != nil {
		return nil, err
	}
	return priv, nil
}
