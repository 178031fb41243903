package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/lease/boltstore"
)

// keygen writes a new controller.key (0600) and controller.pub into dir.
func keygen(dir string, overwrite bool, stderr io.Writer) error {
	id, err := fence.WriteKeyPair(dir, overwrite)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists (use --force to replace it)", filepath.Join(dir, fence.PrivateKeyFile))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s and %s (key id %s)\n", filepath.Join(dir, fence.PrivateKeyFile),
		filepath.Join(dir, fence.PublicKeyFile), id)
	return nil
}

// writeKeyPair generates a key, writes it to path and its public half to
// pubPath(path).
func writeKeyPair(path string, overwrite bool) (ed25519.PrivateKey, error) {
	priv, err := fence.WriteKeyFiles(path, pubPath(path), overwrite)
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

// loadSigner loads the key at cfg.Key, generating it first if it does not
// exist and cfg.GenerateKey is set.
func loadSigner(cfg Config, log *slog.Logger) (*fence.Signer, error) {
	priv, err := fence.LoadPrivateKey(cfg.Key)
	if errors.Is(err, fs.ErrNotExist) {
		if !cfg.GenerateKey {
			return nil, fmt.Errorf("no key at %s: create one with `controller keygen` or start with --generate-key", cfg.Key)
		}
		if priv, err = writeKeyPair(cfg.Key, false); err == nil {
			log.Info("generated controller key", "key", cfg.Key, "public", pubPath(cfg.Key))
		}
	}
	if err != nil {
		return nil, err
	}
	return fence.NewSigner(priv)
}

// storePath is the lease store file in dataDir.
func storePath(dataDir string) string { return filepath.Join(dataDir, "leases.db") }

// epochBump raises the epoch of the (stopped) controller's store to
// max(now in Unix ms, old + 1).
func epochBump(dataDir string, now time.Time, stderr io.Writer) error {
	old, bumped, err := boltstore.BumpEpoch(storePath(dataDir), now, time.Second)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "epoch of %s raised from %d to %d\n", storePath(dataDir), old, bumped)
	return nil
}

// ensureDir creates dir (0700) if it does not exist.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	return nil
}
