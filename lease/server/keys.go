package server

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/fencegate/fencegate/fence"
)

// StorePath is the bbolt lease store file in dataDir.
func StorePath(dataDir string) string { return filepath.Join(dataDir, "leases.db") }

// loadSigner loads the key at cfg.Key, generating it first if it does not
// exist and cfg.GenerateKey is set.
func loadSigner(cfg Config, log *slog.Logger) (*fence.Signer, error) {
	priv, err := fence.LoadPrivateKey(cfg.Key)
	if errors.Is(err, fs.ErrNotExist) {
		if !cfg.GenerateKey {
			return nil, fmt.Errorf("no key at %s: create one with `controller keygen` or start with --generate-key", cfg.Key)
		}
		if priv, err = writeKeyPair(cfg.Key); err == nil {
			log.Info("generated controller key", "key", cfg.Key, "public", pubPath(cfg.Key))
		}
	}
	if err != nil {
		return nil, err
	}
	return fence.NewSigner(priv)
}

// writeKeyPair generates a key, writes it to path and its public half to
// pubPath(path); an existing file at path is not replaced.
func writeKeyPair(path string) (ed25519.PrivateKey, error) {
	priv, err := fence.WriteKeyFiles(path, pubPath(path), false)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("%s exists (use --force to replace it)", path)
	}
	return priv, err
}

// pubPath is where the public half of the key at path goes: "x.key" →
// "x.pub", anything else gets ".pub" appended.
func pubPath(path string) string {
	return strings.TrimSuffix(path, ".key") + ".pub"
}
