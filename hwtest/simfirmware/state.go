package simfirmware

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// fenceRec is the firmware's highest token in one domain.
type fenceRec struct {
	Epoch  uint64 `json:"epoch"`
	Seq    uint64 `json:"seq"`
	Holder string `json:"holder"`
}

// admits reports whether a token at (epoch, seq, holder) may be applied
// over f: newer, or the same lease.
func (f fenceRec) admits(epoch, seq uint64, holder string) bool {
	switch {
	case epoch != f.Epoch:
		return epoch > f.Epoch
	case seq != f.Seq:
		return seq > f.Seq
	}
	return holder == f.Holder || f.Holder == ""
}

// loadFences reads the state file; a missing file is an empty state.
func loadFences(path string) (map[string]fenceRec, error) {
	m := map[string]fenceRec{}
	if path == "" {
		return m, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	return m, nil
}

// storeFences replaces the state file atomically (temp file, fsync,
// rename, fsync dir), as firmware would write its flash page.
func storeFences(path string, m map[string]fenceRec) error {
	if path == "" {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
