package sim

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/fencegate/fencegate/devices"
	"github.com/fencegate/fencegate/fence"
)

// tok returns a token of domain "d" at (epoch, seq) held by holder.
func tok(epoch, seq uint64, holder string) fence.Token {
	return fence.Token{Domain: "d", Epoch: epoch, Seq: seq, Holder: holder, TTLms: 1000}
}

// cmd returns a command with id, op, args and token.
func cmd(id, op, args string, t fence.Token) devices.Command {
	c := devices.Command{ID: id, Op: op, Token: t}
	if args != "" {
		c.Args = json.RawMessage(args)
	}
	return c
}

// mustNew opens a device "dev" with cfg, its log in a temp dir unless set,
// and closes it at cleanup.
func mustNew(t *testing.T, cfg Config) *Device {
	t.Helper()
	if cfg.Log == "" {
		cfg.Log = filepath.Join(t.TempDir(), "apply.log")
	}
	d, err := New("dev", cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// mustApply applies c and fails the test on error.
func mustApply(t *testing.T, d *Device, c devices.Command) json.RawMessage {
	t.Helper()
	out, err := d.Apply(context.Background(), c)
	if err != nil {
		t.Fatalf("Apply(%s %s): %v", c.ID, c.Op, err)
	}
	return out
}

// mustReadLog reads d's apply log.
func mustReadLog(t *testing.T, d *Device) []Entry {
	t.Helper()
	entries, err := ReadLog(d.cfg.Log)
	if err != nil {
		t.Fatalf("ReadLog: %v", err)
	}
	return entries
}
