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
	priv, err := writeKeyPair(filepath.Join(dir, "controller.key"), overwrite)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s and %s (key id %s)\n", filepath.Join(dir, "controller.key"),
		filepath.Join(dir, "controller.pub"), fence.KeyIDOf(priv.Public().(ed25519.PublicKey)))
	return nil
}

// writeKeyPair generates a key, writes it to path and its public half to
// pubPath(path).
func writeKeyPair(path string, overwrite bool) (ed25519.PrivateKey, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("key directory: %w", err)
	}
	priv, err := fence.GenerateKey()
	if err != nil {
		return nil, err
	}
	if err := fence.WritePrivateKey(path, priv, overwrite); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%s exists (use --force to replace it)", path)
		}
		return nil, err
	}
	if err := fence.WritePublicKey(pubPath(path), priv.Public().(ed25519.PublicKey)); err != nil {
		return nil, err
	}
	return priv, nil
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

// epochBump raises the epoch of the (stopped) controller's store.
func epochBump(dataDir string, stderr io.Writer) error {
	old, bumped, err := boltstore.BumpEpoch(storePath(dataDir), time.Now(), time.Second)
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
