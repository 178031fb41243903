package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/atomicfile"
)

// fences is a device's highest applied token per domain.
type fences map[string]fence.Fence

// admits reports whether tok may be applied: its domain has no fence yet, or
// tok is past the fence, or at it with the same holder (one position with
// two holders cannot come from one controller).
func (fm fences) admits(tok fence.Token) bool {
	f, ok := fm[tok.Domain]
	if !ok {
		return true
	}
	switch fence.ComparePosition(tok.Epoch, tok.Seq, f.Epoch, f.Seq) {
	case 1:
		return true
	case 0:
		return tok.Holder == f.Holder
	}
	return false
}

// raised returns a copy of fm with tok's domain fenced at tok, and whether
// that moved the fence.
func (fm fences) raised(tok fence.Token) (fences, bool) {
	if f, ok := fm[tok.Domain]; ok && f == tok.Fence() {
		return fm, false
	}
	out := make(fences, len(fm)+1)
	for d, f := range fm {
		out[d] = f
	}
	out[tok.Domain] = tok.Fence()
	return out, true
}

// loadFences reads a fence file; "" or a missing file is no fences.
func loadFences(path string) (fences, error) {
	fm := fences{}
	if path == "" {
		return fm, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fm, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read fence file: %w", err)
	}
	if err := json.Unmarshal(data, &fm); err != nil {
		return nil, fmt.Errorf("read fence file %s: %w", path, err)
	}
	return fm, nil
}

// store replaces the fence file at path with fm so that a crash leaves
// either the old file or the new one.
func (fm fences) store(path string) error {
	data, err := json.Marshal(fm)
	if err != nil {
		return fmt.Errorf("write fence file: %w", err)
	}
	if err := atomicfile.WriteFile(path, data, 0o600, true); err != nil {
		return fmt.Errorf("fence file: %w", err)
	}
	return nil
}
